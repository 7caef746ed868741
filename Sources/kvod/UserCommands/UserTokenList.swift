import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

struct UserTokenList: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List a user's token ids (never the tokens).")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        guard let user = try source.read().user(named: name) else {
            throw UserCommandError("no user '\(PrintableText.escaped(name, limit: 64))'")
        }
        for token in user.tokens { print(token.id) }
    }
}
