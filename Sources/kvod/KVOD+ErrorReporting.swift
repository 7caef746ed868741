import ArgumentParser

/// How kvod (and `kvod user`, `kvod backup`, `kvod restore`) exits on an error before it serves: one line on
/// standard error (`ErrorLine`: text, or JSON under `--log-format json`) and an exit status saying what kind of
/// error it was. Main thread.
extension KVOD {
    /// Exits for a setting of the config file or the environment that cannot be used: one `kvod: error:` line
    /// naming where it came from, exit 64.
    static func exitReporting(configurationError error: ConfigurationError, json: Bool) -> Never {
        exitReporting(problem: "\(error)", json: json)
    }

    /// Exits with one `kvod: error: <problem>` line, exit 64 (a configuration that cannot be used).
    static func exitReporting(problem: String, json: Bool) -> Never {
        ErrorLine.write(program: "kvod", message: problem, usage: nil, exitCode: ConfigurationError.exitCode, json: json)
        exitProcess(ConfigurationError.exitCode)
    }

    /// Exits for `error` as `command` (kvod or `kvod user`) parsed or ran: help and `--version` (exit 0) and a
    /// bare exit status (no message) as ArgumentParser does them; every other error as one
    /// `<program>: error: <message>` (ArgumentParser's `Error: ` prefix replaced), usage errors followed by the
    /// usage and exit 2, failures exit 1.
    static func exitReporting(_ error: any Error, of command: any ParsableCommand.Type, program: String, json: Bool = false) -> Never {
        let code = command.exitCode(for: error)
        let message = command.fullMessage(for: error)
        guard code != .success, !message.isEmpty else { command.exit(withError: error) }
        let text = message.hasPrefix("Error: ") ? String(message.dropFirst("Error: ".count)) : message
        let status = code == .validationFailure ? usageExitCode : code.rawValue
        // ArgumentParser's message is the error, a blank line and the usage: the usage a field of its own in JSON.
        if json, let split = text.firstRange(of: "\nUsage: ") ?? text.firstRange(of: "\nUSAGE: ") {
            let usage = text[text.index(after: split.lowerBound)...].trimmingWhitespace
            let head = text[..<split.lowerBound].trimmingWhitespace
            ErrorLine.write(program: program, message: head, usage: usage, exitCode: status, json: true)
        } else {
            ErrorLine.write(program: program, message: json ? text.trimmingWhitespace : text, usage: nil, exitCode: status, json: json)
        }
        exitProcess(status)
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces and newlines.
    fileprivate var trimmingWhitespace: String {
        String(drop { $0 == " " || $0 == "\n" }.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
}
