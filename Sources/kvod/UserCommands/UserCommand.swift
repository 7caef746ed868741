import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

/// `kvod user …`: offline user management on a stopped server (docs/protocol.md, "Users"). Each
/// subcommand reads the users (from `--users FILE` or the store under `--data DIR`), changes them and
/// writes them back. Passwords come from KVOD_PASSWORD or a prompt on a terminal, never from argv.
struct UserCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvod user",
        abstract: "Manage kvod's users on a stopped server (a running one: kvoclient user …).",
        subcommands: [UserAdd.self, UserRemove.self, UserList.self, UserPasswd.self, UserGrant.self, UserRevoke.self,
                      UserToken.self])
}
