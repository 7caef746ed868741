/// Where one of kvod's settings came from (flags over environment over file). A value.
enum SettingSource: Equatable, Sendable, CustomStringConvertible {
    case file(path: String, line: Int)
    case environment(variable: String)
    case commandLine

    var description: String {
        switch self {
        case let .file(path, line): return "\(path) line \(line)"
        case let .environment(variable): return "environment variable \(variable)"
        case .commandLine: return "the command line"
        }
    }
}
