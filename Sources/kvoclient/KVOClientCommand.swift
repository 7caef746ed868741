import ArgumentParser
import KVOBuildCommit
import KVOClient
import KVOVersion

/// `kvoclient`: a command-line client for kvod.
///
/// Exit codes: 0 success, 1 the server answered with an error, 2 a usage error, 3 a connection
/// problem (refused, closed by the server, timed out). Errors are one line on standard error,
/// `kvoclient: error: <message>`.
@main
struct KVOClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "kvoclient",
        abstract: "Observe and change key paths on objects held by a kvod server.",
        discussion: """
            A value argument is parsed as JSON when it is valid JSON, and taken as a plain string \
            otherwise: `set clock date 2026-11-21` and `set clock date '"2026-11-21"'` both store \
            the string "2026-11-21". A value that looks like JSON (it starts with {, [ or ", or is \
            written as a number) but is not valid JSON, such as 1e400 (out of range) or '[1,', is a \
            usage error. Every argument must be valid UTF-8.

            Exit codes: 0 success, 1 the server answered with an error, 2 usage error, \
            3 connection problem.
            """,
        version: KVOClientCommand.version,
        subcommands: [
            CreateCommand.self, DeleteCommand.self, GetCommand.self, SetCommand.self, IncrementCommand.self,
            InsertCommand.self, RemoveCommand.self, ReplaceCommand.self, BatchCommand.self, TouchCommand.self, PresenceCommand.self, SignalCommand.self,
            SubscribeCommand.self, ListCommand.self, InfoCommand.self, PingCommand.self,
            DefineClassCommand.self,
            ClassesCommand.self,
            BindCommand.self,
            CombineCommand.self,
            UnbindCommand.self,
            BindingsCommand.self,
            UserCommand.self,
            StatusCommand.self,
            ConfigCommand.self,
            DigestCommand.self,
            MetricsCommand.self,
            SlowCommand.self, ClientsCommand.self, KillCommand.self,
            BackupCommand.self, CompactCommand.self,
        ]
    )

    /// `kvoclient --version`: the release and, when the build knows it, the commit (`0.1.0 (abc1234)`), as kvod's.
    static var version: String {
        KVODBuildCommit.hash == KVODBuildCommit.unknown ? KVODVersion.version : "\(KVODVersion.version) (\(KVODBuildCommit.short))"
    }

    @OptionGroup var connection: ConnectionOptions

    /// Exit status for a usage error (the shell convention; ArgumentParser itself uses 64).
    static let usageExitCode: Int32 = 2

    /// Parses the arguments, runs the subcommand and maps every failure to one stderr line and an
    /// exit code.
    static func main() async {
        Terminal.restoreBrokenPipeDefault()
        if let invalid = RawArguments.firstInvalidUTF8() {
            // Written as it is: `shown` is printable ASCII with `\xFF` escapes already (printError would
            // double their backslashes).
            Terminal.printToStandardError(
                "kvoclient: error: argument \(invalid.position) is not valid UTF-8: '\(invalid.shown)' (ids, key paths and values travel as UTF-8 JSON)\n")
            Terminal.exit(usageExitCode)
        }
        var command: any ParsableCommand
        do {
            command = try parseAsRoot()
        } catch {
            exitForArgumentError(error)
        }
        do {
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch let error as KVODError {
            Terminal.printError(message(for: error))
            Terminal.exit(exitCode(for: error))
        } catch let error as CLIError {
            Terminal.printError(error.description)
            Terminal.exit(error.exitCode)
        } catch {
            exitForArgumentError(error)
        }
        Terminal.exit(0)
    }

    /// The exit code for a client-library error: 1 for the server's answer, 3 for the connection.
    static func exitCode(for error: KVODError) -> Int32 {
        if case .server = error { return 1 }
        return 3
    }

    /// The error line's text: `<code>: <message>` for the server's answer (for `invalid_value` followed
    /// by ` (property 'L', rule 'max')`), the library's description otherwise. `Terminal.printError`
    /// escapes it.
    static func message(for error: KVODError) -> String {
        guard case let .server(code, message, details) = error else { return error.description }
        var text = "\(code.wireName): \(message)"
        if code == .invalidValue, let property = details.property, let rule = details.rule {
            text += " (property '\(property)', rule '\(rule)')"
        }
        if code == .conflict {
            if let value = details.value {
                text += " (now: \(DisplayText.json(value)))"
            } else if let exists = details.exists {
                text += exists ? " (the object exists)" : " (the object does not exist)"
            }
        }
        return text
    }

    /// Lets ArgumentParser report help, version and usage errors, with usage errors exiting 2.
    private static func exitForArgumentError(_ error: any Error) -> Never {
        let code = exitCode(for: error)
        if code == .validationFailure {
            var message = fullMessage(for: error)
            if message.hasPrefix("Error: ") { message = "kvoclient: error: " + message.dropFirst("Error: ".count) }
            Terminal.printToStandardError(message + "\n")
            Terminal.exit(usageExitCode)
        }
        exit(withError: error)
    }
}
