import KVOJSON
import KVOModel

/// The classes defined on the server (`defineClass`), compiled, by name.
///
/// An object of a class stores the class name under the reserved key `$class` (so the class travels
/// with the object's value: into history, onto disk, into readings of earlier revisions). Classes are
/// never redefined or removed, so an object's class, once checked, stays valid. Owned by `KVOEngine`,
/// shared (by reference, never copied) with the key-path evaluator. Loop thread only.
final class ClassCatalog {
    /// The reserved key under which an object of a class stores the class name.
    static let classKey = "$class"

    private var classes: [String: CompiledClass] = [:]

    var isEmpty: Bool { classes.isEmpty }

    subscript(name: String) -> CompiledClass? { classes[name] }

    /// Every class, sorted by name.
    var all: [CompiledClass] { classes.values.sorted { $0.name < $1.name } }

    /// Adds a compiled class; `exists` when the name is taken (classes are not redefined).
    func add(_ compiled: CompiledClass) throws(KVOError) {
        guard classes[compiled.name] == nil else {
            throw KVOError(.exists, "class '\(compiled.name)' is already defined")
        }
        classes[compiled.name] = compiled
    }

    /// The class of `value` (an object's stored value), if it names a defined one.
    func classOf(_ value: JSONValue) -> CompiledClass? {
        guard !classes.isEmpty, case let .object(members) = value,
              case let .string(name)? = members[ClassCatalog.classKey] else { return nil }
        return classes[name]
    }
}
