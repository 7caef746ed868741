import KVOJSON
import KVOModel

/// The read rule for writers (docs/protocol.md, "Permissions", "Writers that may not read"): a write
/// refused because of what an object holds (a type, a length, a missing key, an index, the object's class,
/// its size) tells a caller without `read` on that object one and the same refusal whatever it holds:
/// `forbidden` naming the object and the permission `read`, exactly the reply the write gets when it would
/// follow a reference stored in that object. Loop thread only, as the engine.
extension KVOEngine {
    /// `error`, or the one refusal above when `error` depends on what an object holds and `access` may not
    /// read the object the write of `keyPath` of `object` reached. Called on the error path only, so a write
    /// that succeeds pays nothing; in open mode it returns `error` after one load.
    ///
    /// What passes unchanged: refusals about the request alone (`bad_request`), about rights (`forbidden`),
    /// about the named object's existence (`not_found` for a missing object: the writer's right tells it
    /// that, as `create` does), the reserved `$class` key (`read_only` whatever the object holds), and
    /// everything a write meets in objects the caller may read.
    func concealed(_ error: KVOError, writing keyPath: KeyPath, of object: String,
                   access: ConnectionAccess?) -> KVOError {
        guard let access, !access.isUnrestricted, KVOEngine.dependsOnContent(error),
              objects.contains(object),
              let unreadable = firstUnreadableObject(on: keyPath, of: object, access: access)
        else { return error }
        return ConnectionAccess.forbidden(.read, on: unreadable, user: access.user)
    }

    /// Whether `error` is one a write gets from what an object holds. `too_large` and `quota_exceeded`
    /// count: they are checked after the object's class and the path through it, so which of them a
    /// write meets first depends on the object.
    static func dependsOnContent(_ error: KVOError) -> Bool {
        switch error.code {
        case .notFound, .typeMismatch, .outOfRange, .invalidValue, .tooLarge, .quotaExceeded, .conflict:
            return true
        case .readOnly:
            // Writing `$class` is refused whatever the object holds; a computed property is its class's.
            return error.details["property"] != .string(ClassCatalog.classKey)
        default:
            return false
        }
    }

    /// The first object on the way of a write of `keyPath` of `object` (the object named, then each one a
    /// reference leads to, as `WriteTarget.resolve` walks) that `access` may not read; nil when it may read
    /// every one. A reference is followed only out of an object the caller may read (the write's own rule),
    /// so the walk stops at the first unreadable object.
    func firstUnreadableObject(on keyPath: KeyPath, of object: String, access: ConnectionAccess) -> String? {
        var current = object
        guard access.allows(.read, on: current) else { return current }
        guard var value = objects[object] else { return nil }
        let components = keyPath.components
        for depth in 0..<components.count {
            if depth > 0, let target = value.referencedObject {
                guard let next = objects[target] else { return nil }
                current = target
                guard access.allows(.read, on: current) else { return current }
                value = next
            }
            switch value {
            case let .object(members):
                guard let child = members[components[depth]] else { return nil }
                value = child
            case let .array(elements):
                guard let index = components[depth].arrayIndex, index < elements.count else { return nil }
                value = elements[index]
            default:
                return nil
            }
        }
        // The value written may itself be a reference only for reading; a write never follows the last key.
        return nil
    }
}
