import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

struct UserRemove: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "remove", abstract: "Remove a user.")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        try source.update { users in
            try users.remove(name)
            return true
        }
        print("removed user '\(PrintableText.escaped(name, limit: 64))'")
    }
}
