import KVOJSON

/// KVC's collection operators (`items.@sum.price`): an aggregate over the elements of an array.
///
/// The left key path names the array; the right key path (possibly empty) is read from each element.
/// Behaviour on odd input is fixed and documented in docs/protocol.md:
/// - `@count`: number of elements.
/// - `@sum`: sum of the values that are numbers (others ignored); `0` for none. Integers stay integers
///   unless the sum overflows.
/// - `@avg`: mean of the values that are numbers; `null` for none.
/// - `@min`/`@max`: over the numbers if there is any number, else over the strings (by Unicode scalar
///   order), else `null`. Values of other types are ignored: like values are compared with like.
/// - `@unionOfObjects`: the values, `null`s removed; `@distinctUnionOfObjects` also drops repeats
///   (first occurrence kept).
/// - `@unionOfArrays`/`@distinctUnionOfArrays`: each element is itself an array; the right key path is
///   read from the elements of those arrays and the results are concatenated (`null`s removed).
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
            var hashed = Set<String>()
            for value in values where value != .null {
                // Numbers compare by value (1 == 1.0); everything else by its canonical JSON.
                let key = value.doubleValue.map { "n:\($0)" } ?? JSONWriter.string(value)
                if hashed.insert(key).inserted { seen.append(value) }
            }
            return .array(seen)
        }
    }

    /// Sum of the numbers among `values`, and how many there were.
    static func sum(_ values: [JSONValue]) -> (value: JSONValue, count: Int) {
        var integerSum: Int64 = 0
        var doubleSum = 0.0
        var isInteger = true
        var count = 0
        for value in values {
            switch value {
            case let .int(integer):
                count += 1
                doubleSum += Double(integer)
                if isInteger {
                    let (result, overflow) = integerSum.addingReportingOverflow(integer)
                    if overflow { isInteger = false } else { integerSum = result }
                }
            case let .double(number):
                count += 1
                doubleSum += number
                isInteger = false
            default:
                continue
            }
        }
        return (isInteger ? .int(integerSum) : .double(doubleSum), count)
    }

    private func extreme(_ values: [JSONValue]) -> JSONValue {
        let wantMinimum = self == .min
        var bestNumber: JSONValue?
        var bestString: String?
        for value in values {
            if let number = value.doubleValue {
                if let current = bestNumber?.doubleValue {
                    if wantMinimum ? number < current : number > current { bestNumber = value }
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
