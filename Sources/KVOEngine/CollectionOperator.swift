import KVOJSON

/// KVC's collection operators (`items.@sum.price`): an aggregate over the elements of an array.
///
/// The left key path names the array; the right key path (possibly empty) is read from each element.
/// Behaviour on odd input is fixed and documented in docs/protocol.md:
/// - `@count`: number of elements.
/// - `@sum`: sum of the values that are numbers (others ignored); `0` for none. Integers are added
///   exactly: the sum is an integer when every value is one and the exact sum fits 64 bits (however the
///   partial sums overflow on the way), else a double.
/// - `@avg`: mean of the values that are numbers; `null` for none.
/// - `@min`/`@max`: over the numbers if there is any number (compared exactly, integers beyond 2^53
///   too; the first of equal values wins), else over the strings (by Unicode scalar order), else `null`.
///   Values of other types are ignored: like values are compared with like.
/// - `@unionOfObjects`: the values, `null`s removed; `@distinctUnionOfObjects` also drops repeats
///   (first occurrence kept; values equal as `set` compares them: `1` and `1.0` are one value).
/// - `@unionOfArrays`/`@distinctUnionOfArrays`: the arrays read from the elements, concatenated (`null`s
///   removed): see `KeyPathEvaluator` for how each element gives its array.
public enum CollectionOperator: String, CaseIterable, Sendable {
    case count = "@count"
    case sum = "@sum"
    case avg = "@avg"
    case min = "@min"
    case max = "@max"
    case unionOfObjects = "@unionOfObjects"
    case distinctUnionOfObjects = "@distinctUnionOfObjects"
    case unionOfArrays = "@unionOfArrays"
    case distinctUnionOfArrays = "@distinctUnionOfArrays"

    /// Whether the elements are themselves arrays to be flattened.
    var flattensArrays: Bool { self == .unionOfArrays || self == .distinctUnionOfArrays }

    /// Aggregates the right-path values (already flattened for the array unions).
    func aggregate(_ values: [JSONValue]) -> JSONValue {
        switch self {
        case .count:
            return .int(Int64(values.count))
        case .sum:
            return CollectionOperator.sum(values).value
        case .avg:
            let (sum, count) = CollectionOperator.sum(values)
            guard count > 0, let total = sum.doubleValue else { return .null }
            return .double(total / Double(count))
        case .min, .max:
            return extreme(values)
        case .unionOfObjects, .unionOfArrays:
            return .array(values.filter { $0 != .null })
        case .distinctUnionOfObjects, .distinctUnionOfArrays:
            var seen: [JSONValue] = []
            var hashed = Set<DistinctValueKey>()
            for value in values where value != .null {
                if hashed.insert(DistinctValueKey(value: value)).inserted { seen.append(value) }
            }
            return .array(seen)
        }
    }

    /// Sum of the numbers among `values`, and how many there were. Integers are added exactly (a wrapping
    /// 64-bit sum and a count of the times it wrapped, so a partial sum may overflow and come back); the
    /// result is an integer when every number is one and the exact sum fits, else the double sum.
    static func sum(_ values: [JSONValue]) -> (value: JSONValue, count: Int) {
        var integerSum = ExactIntegerSum()
        var doubleSum = 0.0
        var isInteger = true
        var count = 0
        for value in values {
            switch value {
            case let .int(integer):
                count += 1
                doubleSum += Double(integer)
                integerSum.add(integer)
            case let .double(number):
                count += 1
                doubleSum += number
                isInteger = false
            default:
                continue
            }
        }
        if isInteger, let exact = integerSum.exactValue { return (.int(exact), count) }
        return (.double(doubleSum), count)
    }

    private static func isNumber(_ value: JSONValue) -> Bool {
        switch value {
        case .int, .double: return true
        default: return false
        }
    }

    private func extreme(_ values: [JSONValue]) -> JSONValue {
        let wantMinimum = self == .min
        var bestNumber: JSONValue?
        var bestString: String?
        for value in values {
            if CollectionOperator.isNumber(value) {
                if let current = bestNumber {
                    // Exact: an Int64 beyond 2^53 is not rounded to a double to be compared.
                    if wantMinimum ? value.isNumericallyLess(than: current) : current.isNumericallyLess(than: value) {
                        bestNumber = value
                    }
                } else {
                    bestNumber = value
                }
            } else if case let .string(text) = value {
                if let current = bestString {
                    let better = wantMinimum
                        ? text.unicodeScalars.lexicographicallyPrecedes(current.unicodeScalars)
                        : current.unicodeScalars.lexicographicallyPrecedes(text.unicodeScalars)
                    if better { bestString = text }
                } else {
                    bestString = text
                }
            }
        }
        if let bestNumber { return bestNumber }
        if let bestString { return .string(bestString) }
        return .null
    }
}
