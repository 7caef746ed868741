import KVOJSON

/// A parsed expression of kvod's small, safe expression language: the formula of a computed
/// property, or a binding's `filter`, `convert` or `reduce`.
///
/// An expression reads key paths of a context object (`items.@sum.price`, `address.city`) and
/// variables (`$value`, `$0`, with `.key` steps into their value), and combines them with literals
/// (numbers, strings, `true`, `false`, `null`, `[a, b]`), operators and functions; the rules are in
/// `ExpressionBinaryOperator`, `ExpressionUnaryOperator` and `ExpressionFunction`, the grammar in
/// `ExpressionParser`. Parsing is bounded (`maximumSourceLength`, `maximumDepth`,
/// `maximumNodeCount`) so hostile input cannot exhaust the stack or the loop thread; evaluation
/// walks the prepared tree and never re-parses text. An immutable value, any thread.
struct Expression: Equatable, Sendable, CustomStringConvertible {
    /// Longest source accepted, in UTF-8 bytes.
    static let maximumSourceLength = 4096
    /// Deepest nesting accepted: parentheses, calls, array literals, unary operators and `?:` each
    /// add a level.
    static let maximumDepth = 64
    /// Most nodes (literals, key paths, variables, operators, calls) in one expression.
    static let maximumNodeCount = 1024
    /// Largest string or array an evaluation may build (by concatenation, a function or an array
    /// literal), in bytes (an array's as its JSON text, roughly). Values read from key paths and
    /// variables pass through as they are.
    static let maximumValueBytes = 1 << 20

    /// The source text as written.
    let source: String
    /// Key paths the expression reads (relative to its context object), de-duplicated, in
    /// first-appearance order. Variables (`$value`, `$0`, …) are not key paths.
    let keyPaths: [KeyPath]
    /// Names of the variables it uses, without `$` ("value", "0", "1", …).
    let variables: Set<String>
    /// The parsed tree.
    let root: ExpressionNode

    /// Parses `text`; errors carry the 1-based column (in Characters) where the problem is.
    static func parse(_ text: String) throws(ExpressionError) -> Expression {
        let result = try ExpressionParser.parse(text)
        return Expression(source: text, keyPaths: result.keyPaths, variables: result.variables, root: result.root)
    }

    /// 1-based column (in Characters) of the first occurrence of `needle` in the source, 1 if absent:
    /// where an error about a key path or a variable the context does not provide points.
    func column(of needle: String) -> Int {
        var index = source.startIndex
        var column = 1
        while index < source.endIndex {
            if source[index...].hasPrefix(needle) { return column }
            index = source.index(after: index)
            column += 1
        }
        return 1
    }

    /// Evaluates the expression. `keyPath` reads a key path of the context object (the caller
    /// follows references, applies collection operators and records dependencies); it is called
    /// once per key-path occurrence that evaluation actually reaches (`&&`, `||` and `?:` skip the
    /// others). `variables` maps names without `$` to values. A runtime error (type error,
    /// overflow, division by zero, unknown variable) throws, as does a `limit` error (a built value over
    /// `maximumValueBytes`, or more work than `budget` has left: give the computed properties that
    /// `keyPath` evaluates the same budget). Runs on the caller's thread.
    func evaluate(variables: [String: JSONValue] = [:], budget: ExpressionBudget = ExpressionBudget(),
                  keyPath: (KeyPath) -> JSONValue) throws(ExpressionError) -> JSONValue {
        try withoutActuallyEscaping(keyPath) { (reader) throws(ExpressionError) -> JSONValue in
            try ExpressionEvaluator(variables: variables, readKeyPath: reader, budget: budget).evaluate(root)
        }
    }

    /// Truthiness, for `!`, `&&`, `||`, `?:` and binding filters: `false`, `null`, `0`, `0.0` and
    /// `""` are false; everything else (empty arrays and objects included) is true.
    static func isTruthy(_ value: JSONValue) -> Bool {
        switch value {
        case .null: return false
        case let .bool(flag): return flag
        case let .int(integer): return integer != 0
        case let .double(number): return number != 0
        case let .string(text): return !text.isEmpty
        case .array, .object: return true
        }
    }

    var description: String { source }
}
