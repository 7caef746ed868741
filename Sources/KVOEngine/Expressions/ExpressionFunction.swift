#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KVOJSON

/// The functions an expression may call, resolved by name at parse time (an unknown name or a wrong
/// number of arguments is a syntax error).
///
/// Unless said otherwise a `null` argument gives `null` (a missing dependency makes a computed
/// value `null`, not an error), and an argument of the wrong type is a runtime error naming the
/// function and the type. Results that are not finite numbers are runtime errors.
/// - `round(x)`, `floor(x)`, `ceil(x)`: an int stays itself; a double is rounded (`round` halves
///   away from zero) and becomes an int when it fits in 64 bits. `round(x, digits)` rounds to
///   `digits` decimals (negative: to tens, hundreds…); an int with `digits >= 0` stays itself, an int
///   otherwise gives an int when the result fits, a double gives a double.
/// - `abs(x)` keeps the type (the smallest int overflows); `sqrt(x)`, `cbrt(x)`, `pow(x, y)` give
///   doubles (`sqrt(-1)` is an error: not finite).
/// - `min(a, b, …)`, `max(a, b, …)`: the smallest or largest number as it is (int or double); a `null`
///   argument gives `null`, as for every function of numbers; a single array argument stands for its
///   elements, whose `null`s are ignored; no number gives `null`.
/// - `clamp(x, lo, hi)`: `lo` if `x < lo`, `hi` if `x > hi`, else `x`; `lo > hi` is an error.
/// - `len(x)`: Characters of a string, elements of an array, members of an object.
/// - `upper(s)`, `lower(s)`, `trim(s)` (whitespace at both ends).
/// - `str(x)`: a string as it is, anything else as text (numbers as for `+`).
/// - `number(s)`: the decimal number a string holds (surrounding whitespace allowed; an int when it
///   has no fraction or exponent and fits in 64 bits), a number as it is, otherwise `null`.
/// - `contains(haystack, needle)`: whether a string contains a substring, or an array an element
///   equal to `needle` (`null` included).
///
/// A value type, any thread.
enum ExpressionFunction: String, CaseIterable, Sendable {
    case round, floor, ceil, abs, sqrt, pow, cbrt, min, max, clamp
    case len, upper, lower, trim, str, number, contains

    /// How many arguments the function takes.
    var arity: ClosedRange<Int> {
        switch self {
        case .round: return 1...2
        case .pow, .contains: return 2...2
        case .clamp: return 3...3
        case .min, .max: return 1...Int.max
        case .floor, .ceil, .abs, .sqrt, .cbrt, .len, .upper, .lower, .trim, .str, .number: return 1...1
        }
    }

    /// "takes 1 or 2 arguments", for the arity error.
    var arityDescription: String {
        switch (arity.lowerBound, arity.upperBound) {
        case (1, Int.max): return "takes at least 1 argument"
        case (1, 1): return "takes 1 argument"
        case let (low, high) where low == high: return "takes \(low) arguments"
        case let (low, high): return "takes \(low) or \(high) arguments"
        }
    }

    /// Whether a `null` argument makes the result `null` (all but `number` and `contains`, which look at
    /// `null`s themselves). `min` and `max` propagate a `null` argument like the others, but ignore the
    /// `null` elements of a single array argument (as `@min` does).
    private var propagatesNull: Bool {
        switch self {
        case .number, .contains: return false
        default: return true
        }
    }

    /// Calls the function on evaluated `arguments` (as many as `arity` allows); `column` (the
    /// name's) is where a runtime error points.
    func apply(_ arguments: [JSONValue], column: Int) throws(ExpressionError) -> JSONValue {
        if propagatesNull, arguments.contains(where: { if case .null = $0 { return true } else { return false } }) {
            return .null
        }
        let argument = arguments[0]
        switch self {
        case .round:
            guard arguments.count == 2 else { return try integral(argument, .toNearestOrAwayFromZero, column: column) }
            guard let digits = arguments[1].intValue else {
                throw .runtime("'round' needs an integer number of digits, not \(arguments[1])", at: column)
            }
            return try round(argument, digits: digits, column: column)
        case .floor:
            return try integral(argument, .down, column: column)
        case .ceil:
            return try integral(argument, .up, column: column)
        case .abs:
            if case let .int(integer) = argument {
                guard integer != .min else { throw .runtime("integer overflow in 'abs'", at: column) }
                return .int(Swift.abs(integer))
            }
            return .double(Swift.abs(try number(argument, column: column)))
        case .sqrt:
            return try JSONValue.finite(try number(argument, column: column).squareRoot(), of: "'sqrt'", column: column)
        case .cbrt:
            return try JSONValue.finite(cubeRoot(try number(argument, column: column)), of: "'cbrt'", column: column)
        case .pow:
            let base = try number(argument, column: column)
            let exponent = try number(arguments[1], column: column)
            return try JSONValue.finite(power(base, exponent), of: "'pow'", column: column)
        case .clamp:
            for bound in arguments where bound.doubleValue == nil {
                throw .runtime("'clamp' needs numbers, not \(bound.typeName)", at: column)
            }
            let (low, high) = (arguments[1], arguments[2])
            if high.expressionPrecedes(low) == true {
                throw .runtime("'clamp' needs lo <= hi, not \(low) > \(high)", at: column)
            }
            if argument.expressionPrecedes(low) == true { return low }
            if high.expressionPrecedes(argument) == true { return high }
            return argument
        case .len:
            switch argument {
            case let .string(text): return .int(Int64(text.count))
            case let .array(elements): return .int(Int64(elements.count))
            case let .object(members): return .int(Int64(members.count))
            default: throw .runtime("'len' needs a string, array or object, not \(argument.typeName)", at: column)
            }
        case .upper:
            return .string(try string(argument, column: column).uppercased())
        case .lower:
            return .string(try string(argument, column: column).lowercased())
        case .trim:
            return .string(String(ExpressionFunction.trimmed(try string(argument, column: column))))
        case .str:
            return .string(argument.expressionText)
        case .min, .max:
            return try extreme(arguments, column: column)
        case .number:
            return ExpressionFunction.parseNumber(argument)
        case .contains:
            return try contains(argument, arguments[1], column: column)
        }
    }

    private func number(_ value: JSONValue, column: Int) throws(ExpressionError) -> Double {
        guard let number = value.doubleValue else {
            throw .runtime("'\(rawValue)' needs a number, not \(value.typeName)", at: column)
        }
        return number
    }

    private func string(_ value: JSONValue, column: Int) throws(ExpressionError) -> String {
        guard case let .string(text) = value else {
            throw .runtime("'\(rawValue)' needs a string, not \(value.typeName)", at: column)
        }
        return text
    }

    /// `round`, `floor` or `ceil` without digits.
    private func integral(_ value: JSONValue, _ rule: FloatingPointRoundingRule, column: Int) throws(ExpressionError) -> JSONValue {
        if case .int = value { return value }
        return JSONValue.integral(try number(value, column: column).rounded(rule))
    }

    /// `round(x, digits)`.
    private func round(_ value: JSONValue, digits: Int64, column: Int) throws(ExpressionError) -> JSONValue {
        if case .int = value, digits >= 0 { return value }
        let number = try number(value, column: column)
        let result: Double
        if digits >= 0 {
            let scale = power(10, Double(digits))
            let scaled = number * scale
            // More decimals than a double holds: nothing to round.
            result = scaled.isFinite ? scaled.rounded(.toNearestOrAwayFromZero) / scale : number
        } else {
            // Dividing by an exact power of ten, not multiplying by an inexact 10^-n.
            let scale = power(10, -Double(digits))
            result = scale.isFinite ? (number / scale).rounded(.toNearestOrAwayFromZero) * scale : 0
        }
        let checked = try JSONValue.finite(result, of: "'round'", column: column)
        if case .int = value { return JSONValue.integral(result) }
        return checked
    }

    private func extreme(_ arguments: [JSONValue], column: Int) throws(ExpressionError) -> JSONValue {
        let candidates = arguments.count == 1 ? arguments[0].arrayValue ?? arguments : arguments
        var best: JSONValue?
        for candidate in candidates {
            switch candidate {
            case .null:
                continue
            case .int, .double:
                guard let current = best else {
                    best = candidate
                    continue
                }
                let better = self == .min ? candidate.expressionPrecedes(current) : current.expressionPrecedes(candidate)
                if better == true { best = candidate }
            default:
                throw .runtime("'\(rawValue)' needs numbers, not \(candidate.typeName)", at: column)
            }
        }
        return best ?? .null
    }

    private func contains(_ haystack: JSONValue, _ needle: JSONValue, column: Int) throws(ExpressionError) -> JSONValue {
        switch (haystack, needle) {
        case (.null, _), (.string, .null):
            return .null
        case let (.string(text), .string(part)):
            return .bool(text.contains(part))
        case (.string, _):
            throw .runtime("'contains' needs a string to look for in a string, not \(needle.typeName)", at: column)
        case let (.array(elements), _):
            return .bool(elements.contains(needle))
        default:
            throw .runtime("'contains' needs a string or an array, not \(haystack.typeName)", at: column)
        }
    }

    /// `text` without whitespace at either end.
    private static func trimmed(_ text: String) -> Substring {
        guard let first = text.firstIndex(where: { !$0.isWhitespace }),
              let last = text.lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return text[first...last]
    }

    /// `number(x)`: a string holding a decimal number (`-12`, `3.5`, `1e3`) as a number.
    private static func parseNumber(_ value: JSONValue) -> JSONValue {
        switch value {
        case .int, .double:
            return value
        case let .string(text):
            let candidate = trimmed(text)
            guard let isInteger = decimalShape(candidate.utf8) else { return .null }
            if isInteger, let integer = Int64(candidate) { return .int(integer) }
            guard let number = Double(candidate), number.isFinite else { return .null }
            return .double(number)
        default:
            return .null
        }
    }

    /// Whether `text` is `[+-]?digits(.digits)?([eE][+-]?digits)?`: nil if not, else whether it is
    /// an integer (no fraction, no exponent). Keeps out what `Double(_:)` also accepts ("inf",
    /// "nan", hexadecimal).
    private static func decimalShape(_ text: Substring.UTF8View) -> Bool? {
        var bytes = text[...]
        func skipDigits() -> Bool {
            let before = bytes.count
            while let byte = bytes.first, byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") { bytes.removeFirst() }
            return bytes.count < before
        }
        func skipSign() {
            if let byte = bytes.first, byte == UInt8(ascii: "+") || byte == UInt8(ascii: "-") { bytes.removeFirst() }
        }
        var isInteger = true
        skipSign()
        guard skipDigits() else { return nil }
        if bytes.first == UInt8(ascii: ".") {
            bytes.removeFirst()
            isInteger = false
            guard skipDigits() else { return nil }
        }
        if let byte = bytes.first, byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E") {
            bytes.removeFirst()
            isInteger = false
            skipSign()
            guard skipDigits() else { return nil }
        }
        return bytes.isEmpty ? isInteger : nil
    }
}

// The C math functions, reached from file scope: inside `ExpressionFunction` their names are cases.
private func cubeRoot(_ x: Double) -> Double { cbrt(x) }
private func power(_ base: Double, _ exponent: Double) -> Double { pow(base, exponent) }
