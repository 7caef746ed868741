import KVOJSON

/// A prefix operator: `-x`, `!x` (also written `not x`).
///
/// - `-`: negates a number (an int stays an int; negating the smallest int is an overflow error);
///   `null` gives `null`; anything else is a runtime error.
/// - `!` / `not`: `true` when the operand is falsy (see `Expression.isTruthy`), else `false`.
///
/// A value type, any thread.
enum ExpressionUnaryOperator: String, Sendable {
    case negate = "-"
    case not = "!"

    /// Applies the operator to `operand`; `column` is where a runtime error points.
    func apply(_ operand: JSONValue, column: Int) throws(ExpressionError) -> JSONValue {
        switch self {
        case .not:
            return .bool(!Expression.isTruthy(operand))
        case .negate:
            switch operand {
            case .null:
                return .null
            case let .int(integer):
                let (negated, overflow) = Int64(0).subtractingReportingOverflow(integer)
                guard !overflow else { throw .runtime("integer overflow in '-'", at: column) }
                return .int(negated)
            case let .double(number):
                return .double(-number)
            default:
                throw .runtime("'-' needs a number, not \(operand.typeName)", at: column)
            }
        }
    }
}
