import KVOJSON
import KVOModel

/// Where a write through a key path lands: the stored object (after following references) and the
/// key path inside it.
///
/// Resolution never creates anything: through a missing key, a `null` or a reference to a missing
/// object it is `not_found`; through a number, string or bool `type_mismatch`; into an array only
/// by index (`items.2.price`), `out_of_range` past its end. Collection operators are read-only.
struct WriteTarget {
    /// The object written and the path inside it.
    let location: StoredLocation
    /// When the last key is an index into an array: that index (the write replaces one element).
    let arrayIndex: Int?
    /// Where `location.object` is in the store given to `resolve`, so that the write reaches the
    /// object without hashing its id again. Valid only until that store changes.
    let objectIndex: ObjectTable.Index

    /// Resolves `keyPath` of `object` for a write. With `classes`, a key path through a computed
    /// property of an object of a class is `read_only` (a computed value is not stored: nothing inside
    /// it can be written). With `access` (a restricted connection), following a reference needs `read`
    /// on the object holding it, and a reference to a missing object is `forbidden` rather than
    /// `not_found` unless the connection has some right on that object; the caller checks `write` on
    /// the object the target lands in.
    static func resolve(_ keyPath: KeyPath, of object: String, in objects: ObjectTable,
                        classes: ClassCatalog? = nil, access: ConnectionAccess? = nil) throws(KVOError) -> WriteTarget {
        try keyPath.requireWritable()
        guard var objectIndex = objects.index(forKey: object) else {
            throw KVOError(.notFound, "object '\(object)' does not exist")
        }
        let components = keyPath.components
        if components.count == 1, classes?.isEmpty ?? true {
            // A key of the object itself (a stored object is always a JSON object): nothing to read, so its
            // members held as text are not decoded.
            return WriteTarget(location: StoredLocation(object: object, path: components), arrayIndex: nil,
                               objectIndex: objectIndex)
        }
        var value = objects.value(at: objectIndex)
        // The object the walk is in, and where its part of the key path starts: the path inside it is
        // `components[pathStart..<depth]`, made into an array only once, at the end (none per level).
        var current = object
        var pathStart = 0
        /// The path inside `current` up to and including the key at `depth`: the key path's own
        /// components array when no reference was followed (shared, no copy: the location goes into
        /// history and is compared with watched paths' dependencies, which share it too).
        func path(through depth: Int) -> [String] {
            pathStart == 0 && depth == components.count - 1 ? components : Array(components[pathStart...depth])
        }
        for depth in 0..<components.count {
            // Follow a reference stored inside an object before applying the next key.
            if depth > pathStart, let target = value.referencedObject {
                if let access {
                    try access.require(.read, on: current)
                    if access.permissions(on: target).isEmpty {
                        throw ConnectionAccess.forbidden(.write, on: target, user: access.user)
                    }
                }
                guard let targetIndex = objects.index(forKey: target) else {
                    throw KVOError(.notFound, "'\(keyPath.prefix(depth))' refers to object '\(target)', which does not exist")
                }
                objectIndex = targetIndex
                value = objects.value(at: targetIndex)
                current = target
                pathStart = depth
            }
            let key = components[depth]
            let isLast = depth == components.count - 1
            switch value {
            case let .object(members):
                // Without classes (the common server) this costs no lookup of `key`.
                if depth == pathStart, let classes, !classes.isEmpty, members[key] == nil,
                   classes.classOf(value)?.computed[key] != nil {
                    throw KVOError(.readOnly, "'\(key)' is a computed property and read-only",
                                   details: ["property": .string(key)])
                }
                if isLast {
                    return WriteTarget(location: StoredLocation(object: current, path: path(through: depth)), arrayIndex: nil,
                                       objectIndex: objectIndex)
                }
                guard let child = members[key], child != .null else {
                    throw KVOError(.notFound, "'\(keyPath.prefix(depth + 1))' does not exist")
                }
                value = child
            case let .array(elements):
                guard let position = key.arrayIndex else {
                    throw KVOError(.typeMismatch,
                                   "'\(keyPath.prefix(depth))' is an array: write into one element by index ('\(keyPath.prefix(depth)).0')")
                }
                guard position < elements.count else {
                    throw KVOError(.outOfRange,
                                   "index \(position) is out of range for '\(keyPath.prefix(depth))' (\(elements.count) elements)")
                }
                if isLast {
                    return WriteTarget(location: StoredLocation(object: current, path: path(through: depth)), arrayIndex: position,
                                       objectIndex: objectIndex)
                }
                value = elements[position]
            default:
                throw KVOError(.typeMismatch, "'\(keyPath.prefix(depth))' is \(value.article) \(value.typeName), not an object")
            }
        }
        // Unreachable: a key path has at least one key and the loop returns at the last.
        throw KVOError(.badRequest, "empty keyPath")
    }

    /// The location of the array that holds the element, when the write replaces one element.
    var containingArray: StoredLocation? {
        guard arrayIndex != nil else { return nil }
        return StoredLocation(object: location.object, path: Array(location.path.dropLast()))
    }
}
