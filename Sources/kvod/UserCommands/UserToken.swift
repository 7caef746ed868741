import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// `kvod user token add|list|revoke`: API tokens for services.
struct UserToken: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "token", abstract: "Manage a user's API tokens (for services: kvoclient --token, auth with token).",
        subcommands: [UserTokenAdd.self, UserTokenList.self, UserTokenRevoke.self])
}
