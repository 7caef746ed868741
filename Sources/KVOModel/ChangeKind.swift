/// Cocoa's NSKeyValueChange kinds (Apple's values).
public enum ChangeKind: Int, Sendable, Equatable {
    case setting = 1
    case insertion = 2
    case removal = 3
    case replacement = 4
}
