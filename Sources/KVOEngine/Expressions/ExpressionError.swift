/// Why an expression could not be parsed (`syntax`) or evaluated (`runtime`), and where.
///
/// Produced by `Expression.parse` and `Expression.evaluate`; a value type, any thread.
struct ExpressionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// When the problem was found: while parsing, or while evaluating a parsed expression; `limit` is
    /// an evaluation that stopped at a bound (a value over `Expression.maximumValueBytes`, or work over
    /// `ExpressionBudget.maximumSteps`).
    enum Kind: String, Sendable {
        case syntax, runtime, limit
    }

    /// Whether parsing or evaluation failed.
    let kind: Kind
    /// 1-based column (in Characters of the source) of the offending token or node; one past the
    /// last character when the source ended too early.
    let column: Int
    /// What is wrong, for people: "expected ')' after the arguments of 'round'".
    let message: String

    /// A syntax error at `column`.
    static func syntax(_ message: String, at column: Int) -> ExpressionError {
        ExpressionError(kind: .syntax, column: column, message: message)
    }

    /// A runtime error at `column`.
    static func runtime(_ message: String, at column: Int) -> ExpressionError {
        ExpressionError(kind: .runtime, column: column, message: message)
    }

    /// An evaluation stopped at a bound, at `column`.
    static func limit(_ message: String, at column: Int) -> ExpressionError {
        ExpressionError(kind: .limit, column: column, message: message)
    }

    /// "at column 7: expected ')' after the arguments of 'round'".
    var description: String { "at column \(column): \(message)" }
}
