import KVOJSON
import KVOModel

/// Keeps `@count`, `@sum` and `@avg` observations up to date without re-reading the array.
///
/// For a key path `<left>.@op.<right>` whose left part names one stored array whose elements are read
/// without leaving the array's object (inline objects and values, no references), the cache holds
/// each element's right-path value (its contribution) and, for integer contributions, a running sum.
/// Then:
/// - inserting, removing or replacing k elements costs O(k) reads (plus O(1) for the aggregate when
///   every contribution is an integer, else one pass over the cached numbers, with no reading);
/// - a write inside one element re-reads that element only;
/// - anything else (the array replaced, a reference on the left re-pointed, elements that are
///   references) falls back to a full re-read, which also rebuilds the cache.
/// The result always equals a full re-read: sums are recomputed from the cached contributions in
/// element order unless all of them are integers (then the running sum is exact).
/// A class so that a watched path without one pays a single pointer for it. Owned by one
/// `WatchedPath`; loop thread only.
final class AggregateCache {
    let op: CollectionOperator
    /// The reading this cache stands for (value, dependencies, binding): what a full re-read gives.
    private(set) var evaluation: Evaluation
    /// Where the aggregated array is stored.
    let arrayLocation: StoredLocation
    private let rightPath: ArraySlice<String>
    private let keyPath: KeyPath
    /// Each element's right-path value (for `@count`, the elements are not read: `count` suffices).
    private var contributions: [JSONValue]
    private var count: Int
    /// The exact sum of the integer contributions.
    private var integerSum = ExactIntegerSum()
    /// Contributions that are integers (the divisor of `@avg` while all numbers are integers).
    private var integers = 0
    /// Contributions that are numbers but not integers (while any, the sum is recomputed).
    private var nonIntegerNumbers = 0

    /// Operators kept incrementally.
    static func supports(_ op: CollectionOperator) -> Bool {
        op == .count || op == .sum || op == .avg
    }

    /// Builds the cache for `keyPath` of `object` given its full reading; nil when the shape does
    /// not allow incremental upkeep (then the engine re-reads in full).
    init?(keyPath: KeyPath, object: String, evaluation: Evaluation, objects: ObjectTable) {
        guard let opIndex = keyPath.operatorIndex, let op = keyPath.collectionOperator,
              AggregateCache.supports(op),
              let left = try? KeyPath(keyPath.prefix(opIndex)),
              let leftReading = try? KeyPathEvaluator.evaluate(left, of: object, in: objects, strict: false),
              let arrayLocation = leftReading.location,
              case let .array(elements) = leftReading.value
        else { return nil }
        self.op = op
        self.evaluation = evaluation
        self.arrayLocation = arrayLocation
        self.keyPath = keyPath
        self.rightPath = keyPath.components[(opIndex + 1)...]
        self.count = elements.count
        self.contributions = []
        if op != .count {
            contributions.reserveCapacity(elements.count)
            for (index, element) in elements.enumerated() {
                guard let value = AggregateCache.contribution(of: element, at: index, arrayLocation, rightPath,
                                                              keyPath, objects) else { return nil }
                contributions.append(value)
                add(value)
            }
        }
    }

    /// Updates the cache after a write at `location` (with `change` when it was a collection
    /// mutation). Returns false when the write is not one it can follow; the caller then re-reads
    /// in full and rebuilds.
    func update(after change: CollectionChange?, at location: StoredLocation, objects: ObjectTable) -> Bool {
        if location == arrayLocation {
            guard let change else { return false }  // the whole array was set
            return apply(change, objects: objects)
        }
        // A write inside one element of the array.
        guard location.object == arrayLocation.object, location.path.count > arrayLocation.path.count,
              location.path.starts(with: arrayLocation.path),
              let index = location.path[arrayLocation.path.count].arrayIndex, index < count
        else { return false }
        if op == .count { return true }  // an element's contents do not change how many there are
        guard case let .array(elements) = objects[arrayLocation.object]?.observedValue(at: arrayLocation.path),
              index < elements.count,
              let value = AggregateCache.contribution(of: elements[index], at: index, arrayLocation, rightPath, keyPath, objects)
        else { return false }
        remove(contributions[index])
        contributions[index] = value
        add(value)
        refreshValue()
        return true
    }

    private func apply(_ change: CollectionChange, objects: ObjectTable) -> Bool {
        switch change.kind {
        case .insertion:
            count += change.indexes.count
            if op == .count { break }
            var inserted: [JSONValue] = []
            inserted.reserveCapacity(change.new.count)
            for (index, element) in zip(change.indexes, change.new) {
                guard let value = AggregateCache.contribution(of: element, at: index, arrayLocation, rightPath, keyPath, objects)
                else { return false }
                inserted.append(value)
                add(value)
            }
            // One pass, not one shift of the tail per index.
            ArrayIndexEdits.insert(inserted, at: change.indexes, into: &contributions)
        case .removal:
            count -= change.indexes.count
            if op == .count { break }
            for index in change.indexes { remove(contributions[index]) }
            ArrayIndexEdits.remove(at: change.indexes, from: &contributions)
        case .replacement:
            if op == .count { break }
            for (index, element) in zip(change.indexes, change.new) {
                guard let value = AggregateCache.contribution(of: element, at: index, arrayLocation, rightPath, keyPath, objects)
                else { return false }
                remove(contributions[index])
                contributions[index] = value
                add(value)
            }
        case .setting:
            return false
        }
        refreshValue()
        return true
    }

    private func refreshValue() {
        switch op {
        case .count:
            evaluation.value = .int(Int64(count))
        case .sum, .avg:
            if nonIntegerNumbers == 0, let exact = integerSum.exactValue {
                if op == .sum {
                    evaluation.value = .int(exact)
                } else {
                    evaluation.value = integers == 0 ? .null : .double(Double(exact) / Double(integers))
                }
            } else {
                // Recompute from the cached numbers, in element order, exactly as a full read does.
                evaluation.value = op.aggregate(contributions)
            }
        default:
            evaluation.value = op.aggregate(contributions)
        }
    }

    private func add(_ value: JSONValue) {
        switch value {
        case let .int(integer):
            integers += 1
            integerSum.add(integer)
        case .double:
            nonIntegerNumbers += 1
        default:
            break
        }
    }

    private func remove(_ value: JSONValue) {
        switch value {
        case let .int(integer):
            integers -= 1
            integerSum.subtract(integer)
        case .double:
            nonIntegerNumbers -= 1
        default:
            break
        }
    }

    /// The right-path value of one element, or nil when reading it leaves the array's object.
    private static func contribution(of element: JSONValue, at index: Int, _ arrayLocation: StoredLocation,
                                     _ rightPath: ArraySlice<String>, _ keyPath: KeyPath,
                                     _ objects: ObjectTable) -> JSONValue? {
        if element.referencedObject != nil { return nil }
        let reading = KeyPathEvaluator.evaluateElement(element, at: arrayLocation.appending(String(index)), rightPath,
                                                       keyPath: keyPath, in: objects)
        return reading.isLocal ? reading.value : nil
    }
}
