import KVOJSON
import KVOModel

/// The `where` of a live query (docs/protocol.md, "Live queries"): an expression of the expression
/// language over the key paths of each object a pattern observation matches (`status == 'open' && total
/// > 100`). An object is in the query's set while the expression is truthy on it.
///
/// Compiled once when the observation is made; what the engine needs to avoid evaluating it is computed
/// here too:
/// - `indexTerm`: a conjunct `keyPath == 'text'` (or `'text' == keyPath`) of the top-level `&&` chain.
///   An object can be in the set only while its value at that key path is that string, so the query is
///   filed under (key path, text) in `PatternIndex` and a write meets it only when the object's value
///   there is that text, before or after the write. Ten thousand queries `owner == '<user>'` cost a
///   write one reading of `owner` and one dictionary lookup, not ten thousand evaluations.
/// - `firstKeys`: the first key of every key path it reads. A write inside the object at a key none of
///   them names cannot change what the expression reads in that object (unless a class's computed
///   property reads it: while any class is defined every write evaluates), so it is not evaluated again.
///
/// Immutable (a class so that a write's many `observation.filter` reads retain one reference, not each
/// field); any thread.
public final class LiveQuery: Equatable, Sendable, CustomStringConvertible {
    /// The expression as the client wrote it.
    public let source: String
    let expression: Expression
    /// A top-level equality with a string literal, when there is one (the first).
    let indexTerm: (keyPath: KeyPath, value: String)?
    /// The first key of each key path the expression reads.
    let firstKeys: Set<String>

    private init(source: String, expression: Expression, indexTerm: (keyPath: KeyPath, value: String)?,
                 firstKeys: Set<String>) {
        self.source = source
        self.expression = expression
        self.indexTerm = indexTerm
        self.firstKeys = firstKeys
    }

    /// Parses `text`: `invalid_expression` (with `field` `where` and the `column`) for a syntax error, a
    /// variable (a query reads only key paths) or an expression over the size limits.
    public static func compile(_ text: String) throws(KVOError) -> LiveQuery {
        let expression: Expression
        do {
            expression = try Expression.parse(text)
        } catch {
            throw KVOError(.invalidExpression, "'where': \(error)",
                           details: ["field": .string("where"), "column": .int(Int64(error.column))])
        }
        if let variable = expression.variables.sorted().first {
            throw KVOError(.invalidExpression,
                           "'where': a live query reads the object's key paths, not variables such as '$\(variable)'",
                           details: ["field": .string("where"), "column": .int(Int64(expression.column(of: "$" + variable)))])
        }
        return LiveQuery(source: text, expression: expression, indexTerm: LiveQuery.equalityTerm(of: expression.root),
                         firstKeys: Set(expression.keyPaths.compactMap(\.components.first)))
    }

    /// The first `keyPath == 'text'` conjunct of `node`'s top-level `&&` chain.
    private static func equalityTerm(of node: ExpressionNode) -> (keyPath: KeyPath, value: String)? {
        switch node {
        case let .and(left, right):
            return equalityTerm(of: left) ?? equalityTerm(of: right)
        case let .binary(.equal, .keyPath(path), .literal(.string(text)), _),
             let .binary(.equal, .literal(.string(text)), .keyPath(path), _):
            return (path, text)
        default:
            return nil
        }
    }

    /// Whether a write at `path` inside the object (a key path of stored keys, empty for the whole
    /// object) can change what the expression reads there.
    func reads(writtenPath path: [String]) -> Bool {
        guard let first = path.first else { return true }
        return firstKeys.contains(first) || firstKeys.contains(where: { $0.hasPrefix("@") })
    }

    /// Steps one evaluation of a filter may take (`ExpressionBudget`): a filter runs on every write to
    /// every object its query may concern, so one client's queries must not cost each write what a
    /// binding or a computed property may (200,000). Ten thousand steps compare strings of 160 KB.
    public static let maximumSteps = 10_000

    /// Whether the expression is truthy with `read` giving each key path's value. A runtime error (a type
    /// error, overflow, more than `maximumSteps`) counts as false: the object is not in the set.
    func holds(_ read: (KeyPath) -> JSONValue) -> Bool {
        var spent = 0
        return holds(read, spent: &spent)
    }

    /// `holds`, adding the steps the evaluation took to `spent`: a replay bounds its many evaluations together.
    func holds(_ read: (KeyPath) -> JSONValue, spent: inout Int) -> Bool {
        let budget = ExpressionBudget(limit: LiveQuery.maximumSteps)
        defer { spent += budget.spent }
        guard let value = try? expression.evaluate(budget: budget, keyPath: read) else { return false }
        return Expression.isTruthy(value)
    }

    public var description: String { source }

    /// Two queries are equal when their texts are (the rest is derived from the text).
    public static func == (left: LiveQuery, right: LiveQuery) -> Bool { left.source == right.source }
}
