import KVOJSON

/// The value rules the expression language shares between its operators and functions.
extension JSONValue {
    /// The value as text for `+` concatenation and `str`: a string as it is; an int in decimal; a
    /// double as JSON text, except that an integral double fitting in 64 bits has no ".0" (`6/2`
    /// gives "3"); `true`/`false`; anything else as compact JSON text.
    var expressionText: String {
        switch self {
        case let .string(text): return text
        case let .int(integer): return String(integer)
        case let .double(number):
            if let integral = Int64(exactly: number) { return String(integral) }
            return JSONWriter.string(self)
        default: return JSONWriter.string(self)
        }
    }

    /// Whether `self` orders before `other`: numbers with numbers (by exact value, as `set` compares them:
    /// an integer beyond 2^53 is not rounded to a double), strings with strings (by Unicode scalars). Nil
    /// for any other pair: such values are not ordered.
    func expressionPrecedes(_ other: JSONValue) -> Bool? {
        switch (self, other) {
        case let (.int(a), .int(b)): return a < b
        case let (.string(a), .string(b)): return a.unicodeScalars.lexicographicallyPrecedes(b.unicodeScalars)
        default:
            guard doubleValue != nil, other.doubleValue != nil else { return nil }
            return isNumericallyLess(than: other)
        }
    }

    /// `number` as a double value, or a runtime error naming `operation` when it is not finite.
    static func finite(_ number: Double, of operation: String, column: Int) throws(ExpressionError) -> JSONValue {
        guard number.isFinite else { throw .runtime("the result of \(operation) is not a finite number", at: column) }
        return .double(number)
    }

    /// The value's size as JSON text, roughly (as history's `estimatedSize` counts it), counted only
    /// until it passes `limit`: the walk stops there, so measuring a huge value costs O(limit).
    func estimatedSize(upTo limit: Int) -> Int {
        var total = 0
        func visit(_ value: JSONValue) -> Bool {
            switch value {
            case .null, .bool: total += 5
            case .int, .double: total += 12
            case let .string(text): total += text.utf8.count + 2
            case let .array(elements):
                total += 2
                for element in elements {
                    total += 1
                    guard visit(element) else { return false }
                }
            case let .object(members):
                total += 2
                for (key, member) in members {
                    total += key.utf8.count + 4
                    guard visit(member) else { return false }
                }
            }
            return total <= limit
        }
        _ = visit(self)
        return total
    }

    /// An integral double as an int when it fits in 64 bits, else as a double.
    static func integral(_ number: Double) -> JSONValue {
        Int64(exactly: number).map { .int($0) } ?? .double(number)
    }
}
