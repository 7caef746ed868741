import KVOJSON

/// Evaluates an `ExpressionNode` tree against variables and a key-path reader.
///
/// Lives for one `Expression.evaluate` call. Key paths are read only when evaluation reaches them
/// (`&&`, `||` and `?:` skip the side they do not need). Recursion follows the tree, whose size the
/// parser bounds (`Expression.maximumNodeCount`). Runs on the caller's thread (the engine's: loop
/// thread only).
struct ExpressionEvaluator {
    /// Variable values by name without `$`.
    let variables: [String: JSONValue]
    /// Reads a key path of the context object.
    let readKeyPath: (KeyPath) -> JSONValue

    /// The value of `node`.
    func evaluate(_ node: ExpressionNode) throws(ExpressionError) -> JSONValue {
        switch node {
        case let .literal(value):
            return value
        case let .array(elements):
            return .array(try evaluate(elements))
        case let .keyPath(path):
            return readKeyPath(path)
        case let .variable(name, keys, column):
            return try variable(name, keys: keys, column: column)
        case let .unary(op, operand, column):
            return try op.apply(evaluate(operand), column: column)
        case let .binary(op, left, right, column):
            let leftValue = try evaluate(left)
            return try op.apply(leftValue, evaluate(right), column: column)
        case let .and(left, right):
            guard Expression.isTruthy(try evaluate(left)) else { return .bool(false) }
            return .bool(Expression.isTruthy(try evaluate(right)))
        case let .or(left, right):
            if Expression.isTruthy(try evaluate(left)) { return .bool(true) }
            return .bool(Expression.isTruthy(try evaluate(right)))
        case let .conditional(condition, then, otherwise):
            return try evaluate(Expression.isTruthy(try evaluate(condition)) ? then : otherwise)
        case let .call(function, arguments, column):
            return try function.apply(evaluate(arguments), column: column)
        }
    }

    /// The values of `nodes`, in order.
    private func evaluate(_ nodes: [ExpressionNode]) throws(ExpressionError) -> [JSONValue] {
        var values: [JSONValue] = []
        values.reserveCapacity(nodes.count)
        for node in nodes { values.append(try evaluate(node)) }
        return values
    }

    /// `$name.key…`: members of objects by key, elements of arrays by index; anything else `null`.
    private func variable(_ name: String, keys: [String], column: Int) throws(ExpressionError) -> JSONValue {
        guard var value = variables[name] else { throw .runtime("unknown variable '$\(name)'", at: column) }
        for key in keys {
            switch value {
            case let .object(members):
                value = members[key] ?? .null
            case let .array(elements):
                guard let index = key.arrayIndex, index < elements.count else { return .null }
                value = elements[index]
            default:
                return .null
            }
        }
        return value
    }
}
