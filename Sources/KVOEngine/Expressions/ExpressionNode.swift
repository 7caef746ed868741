import KVOJSON

/// A node of a parsed expression's tree.
///
/// Built once by `ExpressionParser` (key paths validated, functions resolved, variable keys split),
/// so evaluation never looks at source text again. Nodes that can fail at run time carry the
/// column their errors report. An immutable value, any thread.
indirect enum ExpressionNode: Equatable, Sendable {
    /// A number, string, `true`, `false` or `null`.
    case literal(JSONValue)
    /// `[a, b, c]`: an array of the elements' values.
    case array([ExpressionNode])
    /// A key path of the context object, read through the caller's closure.
    case keyPath(KeyPath)
    /// `$name.key…`: a variable's value, walked into by `keys`.
    case variable(name: String, keys: [String], column: Int)
    case unary(ExpressionUnaryOperator, ExpressionNode, column: Int)
    case binary(ExpressionBinaryOperator, ExpressionNode, ExpressionNode, column: Int)
    /// `a && b` (also `a and b`): `false` without evaluating `b` when `a` is falsy, else whether `b`
    /// is truthy.
    case and(ExpressionNode, ExpressionNode)
    /// `a || b` (also `a or b`): `true` without evaluating `b` when `a` is truthy, else whether `b`
    /// is truthy.
    case or(ExpressionNode, ExpressionNode)
    /// `condition ? then : else`.
    case conditional(ExpressionNode, ExpressionNode, ExpressionNode)
    case call(ExpressionFunction, [ExpressionNode], column: Int)
}

extension ExpressionNode {
    /// The column the node carries for its errors, when it has one.
    var column: Int? {
        switch self {
        case let .variable(_, _, column), let .unary(_, _, column), let .binary(_, _, _, column),
             let .call(_, _, column):
            return column
        case .literal, .array, .keyPath, .and, .or, .conditional:
            return nil
        }
    }
}
