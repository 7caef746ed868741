/// Why kvod's settings from its config file or environment cannot be used: each names the file and line, or
/// the environment variable, and the setting. kvod stops with it (`kvod: error: …`, exit 64) at start-up; a
/// SIGHUP reload logs it and keeps the running configuration.
enum ConfigurationError: Error, CustomStringConvertible {
    /// The file cannot be opened or read.
    case unreadable(path: String, reason: String)
    /// A line that is not `name = value` (or a value that is not well formed).
    case syntax(path: String, line: Int, problem: String)
    /// A name that is no flag of kvod's.
    case unknownKey(path: String, line: Int, key: String, suggestion: String?)
    /// A value that does not suit its setting (a list for a single value, a flag that is not true or false,
    /// a setting given twice).
    case badValue(source: SettingSource, key: String, problem: String)
    /// ArgumentParser refused the settings (a value it cannot read, or `KVOD.validate()`); `sources` are where
    /// the settings it names came from.
    case refused(message: String, sources: [SettingSource])

    /// Exit status at start-up: ArgumentParser's for a usage error (EX_USAGE), where the command line's own
    /// usage errors exit 2.
    static let exitCode: Int32 = 64

    var description: String {
        switch self {
        case let .unreadable(path, reason):
            return "cannot read the config file '\(path)': \(reason)"
        case let .syntax(path, line, problem):
            return "\(path) line \(line): \(problem)"
        case let .unknownKey(path, line, key, suggestion):
            let hint = suggestion.map { " (did you mean '\($0)'?)" } ?? ""
            return "\(path) line \(line): unknown setting '\(key)'\(hint); the settings are kvod's flags without the leading --"
        case let .badValue(source, key, problem):
            return "\(source): \(key): \(problem)"
        case let .refused(message, sources):
            return "\(message) (set in \(sources.map(\.description).joined(separator: " and ")))"
        }
    }
}
