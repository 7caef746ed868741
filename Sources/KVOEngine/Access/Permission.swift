import KVOJSON

/// What a rule lets a user do to the objects it names (docs/protocol.md, "Permissions").
///
/// - `read`: get, observe, list, info.
/// - `write`: create, set, insert, remove, replace, delete.
/// - `admin`: defineClass, bind, combine, unbind, user management, other connections' details.
///
/// A value; any thread.
public struct Permission: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = Permission(rawValue: 1 << 0)
    public static let write = Permission(rawValue: 1 << 1)
    public static let admin = Permission(rawValue: 1 << 2)
    public static let all: Permission = [.read, .write, .admin]

    /// The wire names, in this order.
    public static let names: [(String, Permission)] = [("read", .read), ("write", .write), ("admin", .admin)]

    /// The permission a wire name stands for, or nil for an unknown name.
    public init?(name: String) {
        guard let match = Permission.names.first(where: { $0.0 == name }) else { return nil }
        self = match.1
    }

    /// The wire names of the permissions in this set, in `names` order.
    public var nameList: [String] { Permission.names.filter { contains($0.1) }.map(\.0) }

    public var description: String { nameList.joined(separator: ",") }
}
