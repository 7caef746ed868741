import KVOJSON

/// Evaluates an `ExpressionNode` tree against variables and a key-path reader.
///
/// Lives for one `Expression.evaluate` call. Key paths are read only when evaluation reaches them
/// (`&&`, `||` and `?:` skip the side they do not need). Recursion follows the tree, whose size the
/// parser bounds (`Expression.maximumNodeCount`). Every node takes a step of `budget`, and every string
/// an operation reads or builds takes steps for its bytes; a string or array the evaluation builds is at
/// most `Expression.maximumValueBytes` (a `limit` error otherwise). A chain of `+` that builds a string
/// appends to one buffer: linear in the result, not quadratic. Runs on the caller's thread (the engine's:
/// loop thread only).
struct ExpressionEvaluator {
    /// Variable values by name without `$`.
    let variables: [String: JSONValue]
    /// Reads a key path of the context object.
    let readKeyPath: (KeyPath) -> JSONValue
    /// The work this evaluation may still do (shared with the computed properties it reads).
    let budget: ExpressionBudget

    /// The value of `node`.
    func evaluate(_ node: ExpressionNode) throws(ExpressionError) -> JSONValue {
        try budget.spend(1, column: node.column ?? 1)
        switch node {
        case let .literal(value):
            return value
        case let .array(elements):
            let array = JSONValue.array(try evaluate(elements))
            let size = array.estimatedSize(upTo: Expression.maximumValueBytes)
            try budget.spend(bytes: size, per: ExpressionBudget.scannedBytesPerStep, column: 1)
            try ExpressionEvaluator.checkSize(size, column: 1)
            return array
        case let .keyPath(path):
            let value = readKeyPath(path)
            // A computed property read on the way may have used up the budget.
            if budget.isExhausted { try budget.spend(0, column: 1) }
            return value
        case let .variable(name, keys, column):
            return try variable(name, keys: keys, column: column)
        case let .unary(op, operand, column):
            return try op.apply(evaluate(operand), column: column)
        case .binary(.add, _, _, _):
            return try sum(node)
        case let .binary(op, left, right, column):
            let leftValue = try evaluate(left)
            let rightValue = try evaluate(right)
            try budget.spend(bytes: ExpressionEvaluator.bytesRead(leftValue) + ExpressionEvaluator.bytesRead(rightValue),
                             per: ExpressionBudget.scannedBytesPerStep, column: column)
            return try op.apply(leftValue, rightValue, column: column)
        case let .and(left, right):
            guard Expression.isTruthy(try evaluate(left)) else { return .bool(false) }
            return .bool(Expression.isTruthy(try evaluate(right)))
        case let .or(left, right):
            if Expression.isTruthy(try evaluate(left)) { return .bool(true) }
            return .bool(Expression.isTruthy(try evaluate(right)))
        case let .conditional(condition, then, otherwise):
            return try evaluate(Expression.isTruthy(try evaluate(condition)) ? then : otherwise)
        case let .call(function, arguments, column):
            return try call(function, evaluate(arguments), column: column)
        }
    }

    /// The values of `nodes`, in order.
    private func evaluate(_ nodes: [ExpressionNode]) throws(ExpressionError) -> [JSONValue] {
        var values: [JSONValue] = []
        values.reserveCapacity(nodes.count)
        for node in nodes { values.append(try evaluate(node)) }
        return values
    }

    /// `o0 + o1 + … + on` (the parser's left-leaning chain of `+`), folded left to right exactly as the
    /// operator would fold it (`1 + 2 + 'x'` is `"3x"`), but once the running value is a string the rest
    /// is appended to one buffer: building an n-byte string costs O(n), where re-joining at every `+`
    /// copied the growing prefix each time.
    private func sum(_ node: ExpressionNode) throws(ExpressionError) -> JSONValue {
        var operands: [(node: ExpressionNode, column: Int)] = []
        var first = node
        while case let .binary(.add, left, right, column) = first {
            operands.append((right, column))
            first = left
        }
        operands.reverse()
        // The `+` nodes below the top one (which `evaluate` counted) take their steps too.
        try budget.spend(operands.count - 1, column: operands[0].column)
        var running = try evaluate(first)
        var text: String?  // the running value while it is a string, appended to in place
        for (operand, column) in operands {
            let value = try evaluate(operand)
            if text != nil {
                switch value {
                case .null:
                    text = nil
                    running = .null  // null + anything is null, as the operator says
                case .array, .object:
                    throw .runtime("'+' cannot join string and \(value.typeName)", at: column)
                default:
                    let piece = value.expressionText
                    try budget.spend(bytes: piece.utf8.count, per: ExpressionBudget.copiedBytesPerStep, column: column)
                    try ExpressionEvaluator.checkSize(text!.utf8.count + piece.utf8.count, column: column)
                    text!.append(piece)
                }
            } else {
                running = try ExpressionBinaryOperator.add.apply(running, value, column: column)
                if case let .string(joined) = running {
                    try budget.spend(bytes: joined.utf8.count, per: ExpressionBudget.copiedBytesPerStep, column: column)
                    try ExpressionEvaluator.checkSize(joined.utf8.count, column: column)
                    running = .null  // so that `text` holds the only reference and appends in place
                    text = joined
                }
            }
        }
        return text.map(JSONValue.string) ?? running
    }

    /// Calls `function`, taking steps for the strings it reads and builds (searched strings at a higher
    /// rate) and refusing a string it builds over the size limit (`str` of a large value is refused before
    /// it is written out).
    private func call(_ function: ExpressionFunction, _ arguments: [JSONValue],
                      column: Int) throws(ExpressionError) -> JSONValue {
        var bytes = 0
        for argument in arguments { bytes += ExpressionEvaluator.bytesRead(argument) }
        if function == .str, arguments.count == 1 {
            switch arguments[0] {
            case .array, .object:
                let size = arguments[0].estimatedSize(upTo: Expression.maximumValueBytes)
                bytes += size
                try ExpressionEvaluator.checkSize(size, column: column)
            default:
                break
            }
        }
        // `contains` searches character by character: its strings cost far more per byte.
        let isSearch: Bool
        if function == .contains, case .string = arguments[0] { isSearch = true } else { isSearch = false }
        try budget.spend(bytes: bytes, per: isSearch ? ExpressionBudget.searchedBytesPerStep : ExpressionBudget.scannedBytesPerStep,
                         column: column)
        let result = try function.apply(arguments, column: column)
        if case let .string(text) = result {
            try budget.spend(bytes: text.utf8.count, per: ExpressionBudget.scannedBytesPerStep, column: column)
            try ExpressionEvaluator.checkSize(text.utf8.count, column: column)
        }
        return result
    }

    /// What an operation on `value` reads, in bytes, for the budget (O(1): a string's UTF-8 length, a
    /// collection's element count).
    private static func bytesRead(_ value: JSONValue) -> Int {
        switch value {
        case let .string(text): return text.utf8.count
        case let .array(elements): return 8 * elements.count
        case let .object(members): return 16 * members.count
        default: return 0
        }
    }

    /// A `limit` error when a built value of `size` bytes is over `Expression.maximumValueBytes`.
    private static func checkSize(_ size: Int, column: Int) throws(ExpressionError) {
        guard size > Expression.maximumValueBytes else { return }
        throw .limit("the result would be larger than \(Expression.maximumValueBytes) bytes", at: column)
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
