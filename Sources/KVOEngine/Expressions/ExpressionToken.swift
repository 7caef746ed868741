import KVOJSON

/// One token of an expression's source, with the column it starts at.
///
/// Produced by `ExpressionLexer`, consumed by `ExpressionParser`; a value type, any thread.
struct ExpressionToken: Equatable, Sendable {
    /// The reserved words: they are never key paths.
    enum Keyword: String, Sendable {
        case `true`, `false`, null, and, or, not
    }

    /// Operators and punctuation.
    enum Symbol: String, Sendable {
        case leftParenthesis = "(", rightParenthesis = ")", leftBracket = "[", rightBracket = "]"
        case comma = ",", question = "?", colon = ":"
        case plus = "+", minus = "-", star = "*", slash = "/", percent = "%"
        case equal = "==", notEqual = "!=", less = "<", lessOrEqual = "<=", greater = ">", greaterOrEqual = ">="
        case andAnd = "&&", orOr = "||", bang = "!"
    }

    /// What the token is.
    enum Kind: Equatable, Sendable {
        /// A literal number or string, already converted.
        case literal(JSONValue)
        /// A key path (`items.@sum.price`), validated; a bare identifier is a one-key path.
        case keyPath(KeyPath)
        /// `$name` or `$0`, with the keys that walk into its value (`$value.a.0` → "value", ["a", "0"]).
        case variable(name: String, keys: [String])
        case keyword(Keyword)
        case symbol(Symbol)
        /// After the last character.
        case end
    }

    /// What the token is.
    let kind: Kind
    /// 1-based column (in Characters) of the token's first character.
    let column: Int

    /// The token as quoted in error messages: "'*'", "'round'", "the end".
    var quoted: String {
        switch kind {
        case let .literal(value): return "'\(value)'"
        case let .keyPath(path): return "'\(path.string)'"
        case let .variable(name, keys): return "'$" + ([name] + keys).joined(separator: ".") + "'"
        case let .keyword(keyword): return "'\(keyword.rawValue)'"
        case let .symbol(symbol): return "'\(symbol.rawValue)'"
        case .end: return "the end"
        }
    }
}
