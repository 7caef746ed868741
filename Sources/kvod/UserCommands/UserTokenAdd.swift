import ArgumentParser
import KVOCommandLine
import KVOJSON
import KVOServer
#if canImport(Glibc)
import Glibc
#endif

struct UserTokenAdd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "add", abstract: "Make a new API token for a user and print it (once: only its hash is kept).")
    @OptionGroup var source: UserSource
    @Argument var name: String

    func run() throws {
        var made: (text: String, id: String)?
        try source.update { users in
            made = try users.createToken(for: name)
            return true
        }
        print(made!.text)
        FileHandleStandardError.write("token '\(made!.id)' for '\(name)': shown once, store it now\n")
    }
}
