import KVOJSON

/// An infix operator that evaluates both operands (`&&` and `||` short-circuit and are nodes of
/// their own).
///
/// - Arithmetic `+ - * %`: int with int stays int (overflow is a runtime error); with a double
///   either side the result is a double. `/` always gives a double. Division or remainder by zero
///   is a runtime error; `%` takes the sign of the dividend (`-7 % 3 == -1`). A result that is not
///   finite is a runtime error. A `null` operand gives `null`; any other non-number is a runtime
///   error naming the operator and the types.
/// - `+` with a string on either side concatenates; the other side is converted (`3`, `2.5`, `true`;
///   an integral double fitting in 64 bits without ".0"); an array or object there is a runtime
///   error, a `null` gives `null`.
/// - `< <= > >=`: numbers with numbers (int and double compare by value), strings with strings (by
///   Unicode scalars); any other pair, `null` included, gives `null`.
/// - `== !=`: JSON equality of any two values (`1 == 1.0`); always a bool.
///
/// A value type, any thread.
enum ExpressionBinaryOperator: String, Sendable {
    case equal = "==", notEqual = "!="
    case less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
    case add = "+", subtract = "-", multiply = "*", divide = "/", remainder = "%"

    /// Binding strength: higher binds tighter. `||` is 1 and `&&` 2 (see `ExpressionParser`).
    var precedence: Int {
        switch self {
        case .equal, .notEqual: return 3
        case .less, .lessOrEqual, .greater, .greaterOrEqual: return 4
        case .add, .subtract: return 5
        case .multiply, .divide, .remainder: return 6
        }
    }

    /// Applies the operator; `column` (the operator's) is where a runtime error points.
    func apply(_ left: JSONValue, _ right: JSONValue, column: Int) throws(ExpressionError) -> JSONValue {
        switch self {
        case .equal: return .bool(left == right)
        case .notEqual: return .bool(left != right)
        case .less: return left.expressionPrecedes(right).map { .bool($0) } ?? .null
        case .greater: return right.expressionPrecedes(left).map { .bool($0) } ?? .null
        case .lessOrEqual: return right.expressionPrecedes(left).map { .bool(!$0) } ?? .null
        case .greaterOrEqual: return left.expressionPrecedes(right).map { .bool(!$0) } ?? .null
        case .add, .subtract, .multiply, .divide, .remainder:
            return try arithmetic(left, right, column: column)
        }
    }

    private func arithmetic(_ left: JSONValue, _ right: JSONValue, column: Int) throws(ExpressionError) -> JSONValue {
        if case .null = left { return .null }
        if case .null = right { return .null }
        if self == .add, left.stringValue != nil || right.stringValue != nil {
            return try concatenate(left, right, column: column)
        }
        switch (left, right) {
        case let (.int(a), .int(b)):
            return try integerArithmetic(a, b, column: column)
        default:
            guard let a = left.doubleValue, let b = right.doubleValue else {
                let needs = self == .add ? "numbers or a string" : "numbers"
                throw .runtime("'\(rawValue)' needs \(needs), not \(left.typeName) and \(right.typeName)", at: column)
            }
            return try doubleArithmetic(a, b, column: column)
        }
    }

    private func concatenate(_ left: JSONValue, _ right: JSONValue, column: Int) throws(ExpressionError) -> JSONValue {
        switch (left, right) {
        case (.array, _), (.object, _), (_, .array), (_, .object):
            throw .runtime("'+' cannot join \(left.typeName) and \(right.typeName)", at: column)
        default:
            break
        }
        return .string(left.expressionText + right.expressionText)
    }

    private func integerArithmetic(_ a: Int64, _ b: Int64, column: Int) throws(ExpressionError) -> JSONValue {
        let result: (partialValue: Int64, overflow: Bool)
        switch self {
        case .add: result = a.addingReportingOverflow(b)
        case .subtract: result = a.subtractingReportingOverflow(b)
        case .multiply: result = a.multipliedReportingOverflow(by: b)
        case .divide:
            guard b != 0 else { throw .runtime("division by zero", at: column) }
            return try JSONValue.finite(Double(a) / Double(b), of: "'/'", column: column)
        case .remainder:
            guard b != 0 else { throw .runtime("remainder of a division by zero", at: column) }
            // Int64.min % -1 is 0, though the machine instruction overflows.
            result = b == -1 ? (0, false) : a.remainderReportingOverflow(dividingBy: b)
        default:
            preconditionFailure("integerArithmetic called for '\(rawValue)'")
        }
        guard !result.overflow else { throw .runtime("integer overflow in '\(rawValue)'", at: column) }
        return .int(result.partialValue)
    }

    private func doubleArithmetic(_ a: Double, _ b: Double, column: Int) throws(ExpressionError) -> JSONValue {
        let result: Double
        switch self {
        case .add: result = a + b
        case .subtract: result = a - b
        case .multiply: result = a * b
        case .divide:
            guard b != 0 else { throw .runtime("division by zero", at: column) }
            result = a / b
        case .remainder:
            guard b != 0 else { throw .runtime("remainder of a division by zero", at: column) }
            result = a.truncatingRemainder(dividingBy: b)
        default:
            preconditionFailure("doubleArithmetic called for '\(rawValue)'")
        }
        return try JSONValue.finite(result, of: "'\(rawValue)'", column: column)
    }
}
