import KVOJSON
import KVOModel

/// `increment`: a read-modify-write of one number, atomic because the loop thread owns the engine.
extension KVOEngine {
    /// Adds `step` (`.int` or a finite `.double`) to the number at `keyPath` of `object` and returns the
    /// revision and the new value. A missing or null value counts as 0; anything else but a number is
    /// `type_mismatch`. Integers stay integers until a step or the value is not one; an integer sum past
    /// 64 bits is `out_of_range` and changes nothing.
    ///
    /// The value is read with `access` (`read` on every object the key path reaches: the reply carries
    /// the new value, and so tells the old one) and written as `set` writes it (`write` on the object
    /// written, the class's rules, size limits and quota), with the same notifications, history and
    /// bindings; `$class` and computed properties are `read_only` before anything is added. Loop thread.
    public func increment(_ object: String, keyPath: KeyPath, by step: JSONValue, access: ConnectionAccess? = nil,
                          notifications: inout [ChangeNotification]) throws(KVOError) -> (rev: UInt64, value: JSONValue) {
        let current = try get(object, keyPath: keyPath, access: access)
        // Where it would write, before the sum: `$class` and a computed property are `read_only` as for `set`,
        // whatever they hold (not `type_mismatch` for a class name that is not a number).
        let target = try resolveWrite(keyPath, of: object, access: access)
        if target.location.path.first == ClassCatalog.classKey { throw KVOEngine.classKeyIsReadOnly }
        let sum = try KVOEngine.sum(current, step, at: keyPath)
        // Nothing changed the store since `resolveWrite`: the target is still valid.
        let rev = try write(at: target, value: sum, access: access, notifications: &notifications)
        applyPendingBindings(notifications: &notifications)
        return (rev, sum)
    }

    /// `current + step` as `increment` defines it.
    static func sum(_ current: JSONValue, _ step: JSONValue, at keyPath: KeyPath) throws(KVOError) -> JSONValue {
        let where_ = "'\(PrintableText.escaped(keyPath.string, limit: 64))'"
        switch (current, step) {
        case let (.int(value), .int(by)):
            let (sum, overflow) = value.addingReportingOverflow(by)
            guard !overflow else {
                throw KVOError(.outOfRange, "incrementing \(where_) (\(value)) by \(by) would pass the 64-bit integer range; nothing was changed")
            }
            return .int(sum)
        case (.null, .int), (.null, .double):
            return step
        case let (.int(value), .double(by)):
            return try finite(Double(value) + by, where_)
        case let (.double(value), .int(by)):
            return try finite(value + Double(by), where_)
        case let (.double(value), .double(by)):
            return try finite(value + by, where_)
        default:
            throw KVOError(.typeMismatch, "cannot increment \(where_): it holds \(current.article) \(current.typeName), not a number")
        }
    }

    private static func finite(_ sum: Double, _ where_: String) throws(KVOError) -> JSONValue {
        guard sum.isFinite else { throw KVOError(.outOfRange, "incrementing \(where_) would not give a finite number; nothing was changed") }
        return .double(sum)
    }
}
