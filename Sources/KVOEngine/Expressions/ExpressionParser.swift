import KVOJSON

/// Turns an expression's tokens into a tree of `ExpressionNode`s: recursive descent for the
/// prefix, postfix and bracketed forms, precedence climbing for the infix operators.
///
/// Precedence, lowest first: `?:` (right-associative), `||`/`or`, `&&`/`and`, `==` `!=`,
/// `<` `<=` `>` `>=`, `+` `-`, `*` `/` `%` (all left-associative), unary `-` `!` `not`, then calls
/// and parentheses. Enforces `Expression.maximumDepth` (every parenthesis, call, array literal,
/// unary operator and `?:` is one level, so recursion is bounded whatever the input) and
/// `Expression.maximumNodeCount`. Collects the key paths (de-duplicated, in order of appearance)
/// and variable names. A short-lived value used by `Expression.parse`; any thread.
struct ExpressionParser {
    /// The infix operators, with `&&` and `||` apart because they short-circuit.
    private enum Infix {
        case or, and
        case binary(ExpressionBinaryOperator)

        var precedence: Int {
            switch self {
            case .or: return 1
            case .and: return 2
            case let .binary(op): return op.precedence
            }
        }
    }

    /// What a parse found.
    struct Result {
        let root: ExpressionNode
        let keyPaths: [KeyPath]
        let variables: Set<String>
    }

    private let tokens: [ExpressionToken]
    private var index = 0
    private var depth = 0
    private var nodeCount = 0
    private var keyPaths: [KeyPath] = []
    private var seenKeyPaths: Set<KeyPath> = []
    private var variables: Set<String> = []

    private init(tokens: [ExpressionToken]) {
        self.tokens = tokens
    }

    /// Parses `source` (at most `Expression.maximumSourceLength` bytes) as one expression.
    static func parse(_ source: String) throws(ExpressionError) -> Result {
        if source.utf8.count > Expression.maximumSourceLength {
            throw .syntax("the expression is longer than \(Expression.maximumSourceLength) bytes",
                          at: firstColumnBeyondLimit(source))
        }
        var parser = ExpressionParser(tokens: try ExpressionLexer.tokens(of: source))
        let root = try parser.parseConditional()
        guard case .end = parser.current.kind else {
            throw .syntax("expected an operator or the end, found \(parser.current.quoted)", at: parser.current.column)
        }
        return Result(root: root, keyPaths: parser.keyPaths, variables: parser.variables)
    }

    /// The column of the Character holding the first byte past the length limit.
    private static func firstColumnBeyondLimit(_ source: String) -> Int {
        var bytes = 0
        var column = 1
        for character in source {
            bytes += character.utf8.count
            if bytes > Expression.maximumSourceLength { break }
            column += 1
        }
        return column
    }

    /// The token being looked at; the last token is `.end`, which is never passed.
    private var current: ExpressionToken { tokens[index] }

    /// Moves past the current token and returns it.
    private mutating func advance() -> ExpressionToken {
        let token = tokens[index]
        if index < tokens.count - 1 { index += 1 }
        return token
    }

    /// Goes one nesting level deeper for the construct starting at `column`.
    private mutating func enter(at column: Int) throws(ExpressionError) {
        depth += 1
        guard depth <= Expression.maximumDepth else {
            throw .syntax("the expression nests deeper than \(Expression.maximumDepth) levels", at: column)
        }
    }

    private mutating func leave() {
        depth -= 1
    }

    /// Counts `node` against the node limit and returns it.
    private mutating func counted(_ node: ExpressionNode, at column: Int) throws(ExpressionError) -> ExpressionNode {
        nodeCount += 1
        guard nodeCount <= Expression.maximumNodeCount else {
            throw .syntax("the expression has more than \(Expression.maximumNodeCount) parts", at: column)
        }
        return node
    }

    /// `condition ? then : else`, or just the condition.
    private mutating func parseConditional() throws(ExpressionError) -> ExpressionNode {
        let condition = try parseInfix(minimumPrecedence: 1)
        guard case .symbol(.question) = current.kind else { return condition }
        let question = advance()
        try enter(at: question.column)
        let then = try parseConditional()
        guard case .symbol(.colon) = current.kind else {
            throw .syntax("expected ':' for the '?' at column \(question.column), found \(current.quoted)", at: current.column)
        }
        _ = advance()
        let otherwise = try parseConditional()
        leave()
        return try counted(.conditional(condition, then, otherwise), at: question.column)
    }

    private func infix(_ token: ExpressionToken) -> Infix? {
        switch token.kind {
        case .symbol(.orOr), .keyword(.or): return .or
        case .symbol(.andAnd), .keyword(.and): return .and
        case let .symbol(symbol): return ExpressionBinaryOperator(rawValue: symbol.rawValue).map(Infix.binary)
        default: return nil
        }
    }

    /// Operands joined by infix operators binding at least as tightly as `minimumPrecedence`.
    private mutating func parseInfix(minimumPrecedence: Int) throws(ExpressionError) -> ExpressionNode {
        var left = try parseUnary()
        while let op = infix(current), op.precedence >= minimumPrecedence {
            let token = advance()
            let right = try parseInfix(minimumPrecedence: op.precedence + 1)
            let node: ExpressionNode
            switch op {
            case .or: node = .or(left, right)
            case .and: node = .and(left, right)
            case let .binary(binary): node = .binary(binary, left, right, column: token.column)
            }
            left = try counted(node, at: token.column)
        }
        return left
    }

    private mutating func parseUnary() throws(ExpressionError) -> ExpressionNode {
        let op: ExpressionUnaryOperator
        switch current.kind {
        case .symbol(.minus): op = .negate
        case .symbol(.bang), .keyword(.not): op = .not
        default: return try parsePrimary()
        }
        let token = advance()
        try enter(at: token.column)
        let operand = try parseUnary()
        leave()
        return try counted(.unary(op, operand, column: token.column), at: token.column)
    }

    private mutating func parsePrimary() throws(ExpressionError) -> ExpressionNode {
        let token = current
        switch token.kind {
        case let .literal(value):
            _ = advance()
            return try counted(.literal(value), at: token.column)
        case .keyword(.true), .keyword(.false), .keyword(.null):
            _ = advance()
            let value: JSONValue = token.kind == .keyword(.null) ? .null : .bool(token.kind == .keyword(.true))
            return try counted(.literal(value), at: token.column)
        case let .keyPath(path):
            _ = advance()
            if case .symbol(.leftParenthesis) = current.kind { return try parseCall(named: path, at: token.column) }
            if seenKeyPaths.insert(path).inserted { keyPaths.append(path) }
            return try counted(.keyPath(path), at: token.column)
        case let .variable(name, keys):
            _ = advance()
            variables.insert(name)
            return try counted(.variable(name: name, keys: keys, column: token.column), at: token.column)
        case .symbol(.leftParenthesis):
            _ = advance()
            try enter(at: token.column)
            let inner = try parseConditional()
            guard case .symbol(.rightParenthesis) = current.kind else {
                throw .syntax("expected ')' for the '(' at column \(token.column), found \(current.quoted)", at: current.column)
            }
            _ = advance()
            leave()
            return inner
        case .symbol(.leftBracket):
            _ = advance()
            try enter(at: token.column)
            let elements = try parseList(closedBy: .rightBracket, what: "the elements of the array")
            leave()
            return try counted(.array(elements), at: token.column)
        default:
            throw .syntax("expected an expression, found \(token.quoted)", at: token.column)
        }
    }

    /// `name(arguments)`, the current token being the `(`.
    private mutating func parseCall(named name: KeyPath, at column: Int) throws(ExpressionError) -> ExpressionNode {
        guard let function = ExpressionFunction(rawValue: name.string) else {
            throw .syntax("unknown function '\(name.string)'", at: column)
        }
        let parenthesis = advance()
        try enter(at: parenthesis.column)
        let arguments = try parseList(closedBy: .rightParenthesis, what: "the arguments of '\(function.rawValue)'")
        leave()
        guard function.arity.contains(arguments.count) else {
            throw .syntax("'\(function.rawValue)' \(function.arityDescription), not \(arguments.count)", at: column)
        }
        return try counted(.call(function, arguments, column: column), at: column)
    }

    /// Comma-separated expressions up to and including `closer` (the opener already read).
    private mutating func parseList(closedBy closer: ExpressionToken.Symbol, what: String) throws(ExpressionError) -> [ExpressionNode] {
        var items: [ExpressionNode] = []
        if current.kind == .symbol(closer) {
            _ = advance()
            return items
        }
        while true {
            items.append(try parseConditional())
            switch current.kind {
            case .symbol(.comma):
                _ = advance()
            case .symbol(closer):
                _ = advance()
                return items
            default:
                throw .syntax("expected '\(closer.rawValue)' after \(what), found \(current.quoted)", at: current.column)
            }
        }
    }
}
