import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

struct UserTokenRevoke: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "revoke", abstract: "Revoke a user's token by id.")
    @OptionGroup var source: UserSource
    @Argument var name: String
    @Argument(help: "The token id (the 12 hex digits after kvod_, as `token list` shows).") var id: String

    func run() throws {
        try source.update { users in
            try users.revokeToken(id, of: name)
            return true
        }
        print("revoked token '\(PrintableText.escaped(id, limit: 64))' of '\(name)'")
    }
}
