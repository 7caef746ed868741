import KVOJSON
import KVOModel

/// What reading a key path found.
struct Evaluation: Equatable {
    /// One step of the path's spine: an object it went through, and whether it exists.
    struct BindingStep: Equatable {
        let object: String
        let exists: Bool
    }

    /// The value read when it is held decoded (`.null` when `text` holds it).
    var decoded: JSONValue
    /// The value read as canonical text, after a `set` that kept its value as text (`KVOEngine.rereadPlain`);
    /// nil when it is held decoded. Two plain fields rather than a `HeldValue`: a reading is copied on every
    /// write that may change it, and a field of a two-payload enum costs an outlined copy and destroy each
    /// time (measured, docs/performance.md, issue 28).
    var text: CanonicalText?
    /// The value read (decoded from `text` when it is held so).
    var value: JSONValue {
        get {
            if let text { return text.value }
            return decoded
        }
        set {
            decoded = newValue
            text = nil
        }
    }
    /// Whether the value read equals `other` (`JSONValue ==`), decoding neither text when both are ASCII.
    func hasSameValue(as other: Evaluation) -> Bool {
        switch (text, other.text) {
        case (nil, nil): return decoded == other.decoded
        case let (left?, right?): return left.hasSameValue(as: right)
        case let (left?, nil): return left.hasSameValue(as: other.decoded)
        case let (nil, right?): return right.hasSameValue(as: decoded)
        }
    }
    /// Where the reading looked, minimal (no location inside another): a write at, above or below
    /// any of them may change `value`. Observations are registered at these.
    var dependencies: [StoredLocation]
    /// Where `value` is stored, when the key path names one stored value (no fan-out over an array,
    /// no operator); nil otherwise.
    var location: StoredLocation?
    /// The objects the spine of the path went through: each reference followed before any fan-out
    /// (the root only when it does not exist). When it differs before and after a change, the
    /// observation was re-bound.
    var binding: [BindingStep]
    /// For a reading made for a reader (`KeyPathEvaluator.evaluate(…, reader:)`): the first object the
    /// reading reached that the reader may not read. Nothing of that object was looked at (not even
    /// whether it exists): the reading stopped there and `value` is `null`. Nil when nothing was denied
    /// (and always for unrestricted readings).
    var deniedObject: String? = nil

    init(value: JSONValue, dependencies: [StoredLocation], location: StoredLocation?, binding: [BindingStep],
         deniedObject: String? = nil) {
        decoded = value
        text = nil
        self.dependencies = dependencies
        self.location = location
        self.binding = binding
        self.deniedObject = deniedObject
    }

    static func == (left: Evaluation, right: Evaluation) -> Bool {
        left.hasSameValue(as: right) && left.dependencies == right.dependencies && left.location == right.location
            && left.binding == right.binding && left.deniedObject == right.deniedObject
    }
}

/// Reads key paths over the object store, following references, indexing and mapping arrays and
/// applying collection operators, and records what the reading depended on.
///
/// `strict` reading (for `get`) refuses to walk through a number, string or bool on the path's spine
/// (`type_mismatch`); lenient reading (for observers) gives `null` for any broken path. Key paths have
/// at most `KeyPath.maximumDepth` keys and each key is applied once, so reference cycles cannot make
/// a reading loop.
///
/// Computed properties: a key that is not stored in an object of a class, but names one of the class's
/// computed properties, is evaluated from its expression; the key paths the expression reads (and its
/// `dependsOn`) are read from the same object through this evaluator, so they become dependencies of the
/// reading and a write to any of them re-reads the observation. Computed properties that read others
/// nest at most `maximumComputedDepth` deep (deeper reads as null: a reference cycle between objects
/// cannot recurse without end); within a class, cycles are refused when the class is defined. A
/// `ComputedMemo` lets one change evaluate each computed property once however many readings need it.
/// A short-lived value; loop thread (it reads the engine's store).
struct KeyPathEvaluator {
    /// How deep computed properties may read other computed properties.
    static let maximumComputedDepth = 16

    private let objects: ObjectTable
    /// Objects whose value differs from `objects` (nil: absent), for reading the store as it was at
    /// an earlier revision (history replay). Empty for ordinary reads.
    private let overlay: [String: JSONValue?]
    private let keyPath: KeyPath
    private let strict: Bool
    /// The defined classes, for computed properties (nil: read stored values only).
    private let classes: ClassCatalog?
    /// Computed values already evaluated for the store as it is now (nil: evaluate every time).
    private let memo: ComputedMemo?
    private var computedDepth = 0
    /// The work budget of the computed property being evaluated and those it reads (nil outside one).
    private var budget: ExpressionBudget?
    private var dependencies: [StoredLocation] = []
    private var binding: [Evaluation.BindingStep] = []
    /// Whose rights the reading is made with: every object is checked here before anything in it is
    /// looked at (`enter(_:)`). Nil for an unrestricted reading (open mode, the engine's own readings
    /// shared by many subscribers, which are checked per recipient against `dependencies`).
    private let reader: ConnectionAccess?
    /// The first object `reader` was refused, and how many refusals there were (a computed value
    /// read while one happened is not memoized: it is not the property's value).
    private var deniedObject: String?
    private var denials = 0

    /// What `enter(_:)` found.
    private enum Entry {
        case value(JSONValue)
        case missing
        /// The reader may not read the object; nothing about it was looked up.
        case denied
    }

    private init(objects: ObjectTable, overlay: [String: JSONValue?] = [:], keyPath: KeyPath, strict: Bool,
                 classes: ClassCatalog?, memo: ComputedMemo?, reader: ConnectionAccess? = nil) {
        self.objects = objects
        self.overlay = overlay
        self.keyPath = keyPath
        self.strict = strict
        self.classes = classes.flatMap { $0.isEmpty ? nil : $0 }
        self.memo = memo
        self.reader = reader.flatMap { $0.isUnrestricted ? nil : $0 }
    }

    /// Reads `keyPath` from `object`. Strict reading of a missing object is `not_found`; lenient
    /// reading gives `null` (and depends on the object's creation). `memo` must only be given while it
    /// matches the store being read (never with an `overlay`).
    ///
    /// With `reader` (a restricted connection, or a binding's creator), this is the engine's one way of
    /// reading for a principal: every object the reading reaches (the root, each reference followed,
    /// each element an operator reaches through a reference, everything a computed property reads) is
    /// checked for `read` before anything in it, even its existence, is looked at. Strict reading
    /// then throws `forbidden` naming the first object refused, whatever error the rest of the key path
    /// would have met (so no error describes an unreadable object); lenient reading stops there, reads
    /// `null` and names the object in `deniedObject`.
    static func evaluate(_ keyPath: KeyPath, of object: String, in objects: ObjectTable,
                         overlay: [String: JSONValue?] = [:], strict: Bool, classes: ClassCatalog? = nil,
                         memo: ComputedMemo? = nil, reader: ConnectionAccess? = nil) throws(KVOError) -> Evaluation {
        var evaluator = KeyPathEvaluator(objects: objects, overlay: overlay, keyPath: keyPath, strict: strict,
                                         classes: classes, memo: overlay.isEmpty ? memo : nil, reader: reader)
        let root = StoredLocation(object: object, path: [])
        let value: JSONValue
        switch evaluator.enter(object) {
        case let .value(found):
            value = found
        case .missing:
            if strict { throw KVOError(.notFound, "object '\(object)' does not exist") }
            return Evaluation(value: .null, dependencies: [root], location: nil,
                              binding: [.init(object: object, exists: false)])
        case .denied:
            if strict { throw evaluator.forbidden(object) }
            return Evaluation(value: .null, dependencies: [root], location: nil,
                              binding: [.init(object: object, exists: false)], deniedObject: object)
        }
        // An existing root is implied (no step), so the common binding, "the root and no reference",
        // is an empty array: no allocation per watched path.
        var result: JSONValue
        var location: StoredLocation?
        do {
            (result, location) = try evaluator.walk(value, at: root, keyPath.components[...], keyPath: keyPath,
                                                    onSpine: true)
        } catch {
            // An error met after a refusal may describe what lies behind it: the refusal is the answer.
            if let denied = evaluator.deniedObject { throw evaluator.forbidden(denied) }
            throw error
        }
        if let denied = evaluator.deniedObject {
            if strict { throw evaluator.forbidden(denied) }
            result = .null
            location = nil
        }
        var dependencies = KeyPathEvaluator.minimal(evaluator.dependencies)
        // The common case, a plain path inside the root object: store the key path's own components
        // array rather than the copy the walk built, so a watched path keeps one array, not three.
        let components = keyPath.components
        func shared(_ location: StoredLocation) -> StoredLocation {
            guard location.object == object, location.path.count == components.count, location.path == components
            else { return location }
            return StoredLocation(object: object, path: components)
        }
        location = location.map(shared)
        dependencies = dependencies.map(shared)
        return Evaluation(value: result, dependencies: dependencies, location: location, binding: evaluator.binding,
                          deniedObject: evaluator.deniedObject)
    }

    /// Reads `components` from one array element stored at `location`; also tells whether the
    /// reading left the element's own object (it followed a reference).
    static func evaluateElement(_ element: JSONValue, at location: StoredLocation, _ components: ArraySlice<String>,
                                keyPath: KeyPath, in objects: ObjectTable) -> (value: JSONValue, isLocal: Bool) {
        var evaluator = KeyPathEvaluator(objects: objects, keyPath: keyPath, strict: false, classes: nil, memo: nil)
        let value = (try? evaluator.walk(element, at: location, components, keyPath: keyPath, onSpine: false).0) ?? .null
        return (value, evaluator.dependencies.allSatisfy { $0.object == location.object })
    }

    /// Object `id` in the store being read: the only way this evaluator reaches an object, so the
    /// reader's check comes before anything in it (its existence included) is looked at.
    private mutating func enter(_ id: String) -> Entry {
        if let reader, !reader.allows(.read, on: id) {
            refuse(id)
            return .denied
        }
        if !overlay.isEmpty, let overridden = overlay[id] { return overridden.map(Entry.value) ?? .missing }
        return objects[id].map(Entry.value) ?? .missing
    }

    private mutating func refuse(_ id: String) {
        if deniedObject == nil { deniedObject = id }
        denials += 1
    }

    private func forbidden(_ id: String) -> KVOError {
        ConnectionAccess.forbidden(.read, on: id, user: reader?.user)
    }

    private mutating func record(_ location: StoredLocation?) {
        if let location { dependencies.append(location) }
    }

    /// Walks `components` (a slice of `keyPath`'s) from `value`, stored at `location` (nil for a
    /// computed value).
    private mutating func walk(_ start: JSONValue, at startLocation: StoredLocation?, _ components: ArraySlice<String>,
                               keyPath: KeyPath, onSpine: Bool) throws(KVOError) -> (JSONValue, StoredLocation?) {
        var value = start
        var location = startLocation
        var index = components.startIndex
        while index < components.endIndex {
            // A reference inside an object is followed before the next key is applied. (A stored
            // object itself is never taken for a reference, so references cannot chain.)
            if let target = value.referencedObject, location.map({ !$0.path.isEmpty }) ?? true {
                record(location)
                let targetLocation = StoredLocation(object: target, path: [])
                guard case let .value(targetValue) = enter(target) else {
                    // Missing, or refused to the reader: nothing inside it is looked at.
                    record(targetLocation)
                    if onSpine { binding.append(.init(object: target, exists: false)) }
                    return (.null, nil)
                }
                if onSpine { binding.append(.init(object: target, exists: true)) }
                value = targetValue
                location = targetLocation
            }
            let key = components[index]
            if index == keyPath.operatorIndex, let op = keyPath.collectionOperator {
                return try aggregate(value, at: location, op, rest: components[(index + 1)...], keyPath: keyPath,
                                     onSpine: onSpine, depth: index)
            }
            switch value {
            case let .object(members):
                guard let child = members[key] else {
                    if let here = location, let property = computedProperty(key, of: members, at: here) {
                        // A computed value has no location of its own: what it read is recorded instead.
                        value = evaluate(property, of: here.object, value: value)
                        location = nil
                        index += 1
                        continue
                    }
                    record(location?.appending(key))
                    return (.null, nil)
                }
                value = child
                location = location?.appending(key)
                index += 1
            case let .array(elements):
                record(location)
                if let position = key.arrayIndex {
                    guard position < elements.count else { return (.null, nil) }
                    value = elements[position]
                    location = location?.appending(key)
                    index += 1
                } else {
                    // KVC on arrays: read the rest of the path from every element. The array's
                    // location (recorded above) covers every write inside its elements, so the
                    // elements are read as values without locations of their own (only references
                    // they hold add dependencies).
                    var results: [JSONValue] = []
                    results.reserveCapacity(elements.count)
                    for element in elements {
                        results.append(try walk(element, at: nil, components[index...], keyPath: keyPath, onSpine: false).0)
                    }
                    return (.array(results), nil)
                }
            case .null:
                record(location)
                return (.null, nil)
            default:
                record(location)
                if strict && onSpine {
                    throw KVOError(.typeMismatch,
                                   "'\(keyPath.prefix(index))' is \(value.article) \(value.typeName), not an object")
                }
                return (.null, nil)
            }
        }
        record(location)
        return (value, location)
    }

    private mutating func aggregate(_ value: JSONValue, at location: StoredLocation?, _ op: CollectionOperator,
                                    rest: ArraySlice<String>, keyPath: KeyPath, onSpine: Bool,
                                    depth: Int) throws(KVOError) -> (JSONValue, StoredLocation?) {
        record(location)
        guard case let .array(elements) = value else {
            if value != .null, strict, onSpine {
                throw KVOError(.typeMismatch,
                               "'\(op.rawValue)' needs an array, but '\(keyPath.prefix(depth))' is \(value.article) \(value.typeName)")
            }
            return (.null, nil)
        }
        if op == .count { return (.int(Int64(elements.count)), nil) }
        var values: [JSONValue] = []
        values.reserveCapacity(elements.count)
        // As for a fan-out, the array's location covers writes inside its elements.
        for element in elements {
            if op.flattensArrays {
                if let notArray = try appendArray(of: element, rest, keyPath: keyPath, to: &values) {
                    // Never a silent empty union: `get` is refused, an observer reads null.
                    if strict && onSpine {
                        throw KVOError(.typeMismatch,
                                       "'\(op.rawValue)' needs an array from every element of '\(keyPath.prefix(depth))', but one gives \(notArray.article) \(notArray.typeName)")
                    }
                    return (.null, nil)
                }
            } else {
                values.append(try walk(element, at: nil, rest, keyPath: keyPath, onSpine: false).0)
            }
        }
        return (op.aggregate(values), nil)
    }

    /// For `@unionOfArrays`/`@distinctUnionOfArrays`: appends the array one element gives, as Foundation's
    /// `[element valueForKeyPath:rest]` does: an element that is itself an array gives the right path read
    /// from each of its elements (`arrays.@unionOfArrays.name`); any other element gives the value at the
    /// right path (`orders.@unionOfArrays.tags`), which must be an array. `null` gives nothing. Returns
    /// the value when it is neither an array nor `null` (Foundation would raise: the caller refuses it),
    /// nil when it was appended.
    private mutating func appendArray(of element: JSONValue, _ rest: ArraySlice<String>, keyPath: KeyPath,
                                      to values: inout [JSONValue]) throws(KVOError) -> JSONValue? {
        if case let .array(inner) = element {
            for innerElement in inner {
                values.append(try walk(innerElement, at: nil, rest, keyPath: keyPath, onSpine: false).0)
            }
            return nil
        }
        let value = try walk(element, at: nil, rest, keyPath: keyPath, onSpine: false).0
        switch value {
        case let .array(inner):
            values.append(contentsOf: inner)
            return nil
        case .null:
            return nil
        default:
            return value
        }
    }

    // MARK: - Computed properties

    /// The computed property `key` names, when `members` is a stored object (at the root of its
    /// location) of a class that computes `key`.
    private func computedProperty(_ key: String, of members: [String: JSONValue],
                                  at location: StoredLocation) -> CompiledComputedProperty? {
        guard let classes, location.path.isEmpty, case let .string(className)? = members[ClassCatalog.classKey]
        else { return nil }
        return classes[className]?.computed[key]
    }

    /// Evaluates `property` of object `objectID` (whose value is `objectValue`), recording what it read.
    /// A runtime error in the expression, nesting deeper than `maximumComputedDepth`, or a value that
    /// nests deeper than `StoredDepth.maximum` (which no reply or event could carry to every reader)
    /// reads as null.
    private mutating func evaluate(_ property: CompiledComputedProperty, of objectID: String,
                                   value objectValue: JSONValue) -> JSONValue {
        let root = StoredLocation(object: objectID, path: [])
        // A computed property read by the key path itself gets a budget of its own; one read while
        // evaluating another shares that one's budget (so nesting cannot multiply the work), and, served
        // from the memo, costs what evaluating it cost.
        let isNested = computedDepth > 0
        if let cached = memo?.entry(object: objectID, property: property.name) {
            dependencies.append(contentsOf: cached.dependencies)
            if let reader {
                // The cached value was read without a reader: it stands only if the reader may read
                // everything it read (checked in reading order, so the object named is one the reader
                // reached through readable ones).
                if let refused = cached.dependencies.first(where: { !reader.allows(.read, on: $0.object) }) {
                    refuse(refused.object)
                    return .null
                }
            }
            guard isNested, let budget else { return cached.value }
            budget.charge(cached.cost)
            return budget.isExhausted ? .null : cached.value
        }
        guard computedDepth < KeyPathEvaluator.maximumComputedDepth else {
            record(root)
            return .null
        }
        let outerBudget = self.budget
        let budget = isNested ? outerBudget ?? ExpressionBudget() : ExpressionBudget()
        self.budget = budget
        computedDepth += 1
        defer {
            computedDepth -= 1
            self.budget = outerBudget
        }
        let firstDependency = dependencies.count
        let denialsBefore = denials
        let spentBefore = budget.spent
        for path in property.dependsOn {
            _ = try? walk(objectValue, at: root, path.components[...], keyPath: path, onSpine: false)
        }
        var value: JSONValue
        do {
            value = try property.expression.evaluate(budget: budget) { path in
                (try? walk(objectValue, at: root, path.components[...], keyPath: path, onSpine: false).0) ?? .null
            }
        } catch {
            // A runtime error, a value over the size limit or work over the budget: null.
            value = .null
        }
        // A value cut short by this reading's budget is not the property's value: not memoized.
        guard !budget.isExhausted else { return .null }
        // Nor is one read while the reader was refused something (the refusal decides the reading).
        guard denials == denialsBefore else { return .null }
        if !value.isScalar, value.nestingDepth(upTo: StoredDepth.maximum) > StoredDepth.maximum { value = .null }
        memo?.store(object: objectID, property: property.name, value: value,
                    dependencies: Array(dependencies[firstDependency...]), cost: budget.spent - spentBefore)
        return value
    }

    /// Drops every location that lies inside another one (a write there is already covered).
    static func minimal(_ locations: [StoredLocation]) -> [StoredLocation] {
        if locations.count <= 1 { return locations }
        var byObject: [String: [[String]]] = [:]
        for location in locations { byObject[location.object, default: []].append(location.path) }
        var result: [StoredLocation] = []
        for (object, paths) in byObject.sorted(by: { $0.key < $1.key }) {
            var kept: [[String]] = []
            for path in paths.sorted(by: { $0.count < $1.count }) {
                if !kept.contains(where: { path.starts(with: $0) }) { kept.append(path) }
            }
            result.append(contentsOf: kept.map { StoredLocation(object: object, path: $0) })
        }
        return result
    }
}

extension JSONValue {
    /// "a" or "an", for messages.
    var article: String {
        switch self {
        case .array, .object: return "an"
        default: return "a"
        }
    }
}
