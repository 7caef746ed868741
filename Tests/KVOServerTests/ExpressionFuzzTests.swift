import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Bad input never hurts: seeded random token soups and random bytes through the expression parser and
/// evaluator. Every outcome must be a value or an `ExpressionError` with a column inside the text (plus
/// one, for errors at its end); a trap or a stack overflow would end the test run.
@Suite struct ExpressionFuzzTests {
    static let pieces = [
        "1", "0", "-", "2.5", "1e308", "9223372036854775807", "'a'", "\"b\"", "'", "\"", "\\", "true", "false",
        "null", "x", "x.y", "items.@sum.price", "items.@count", "items.0", "$value", "$0", "$1.k", "$", "@", ".",
        "+", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "!", "not", "and", "or", "?", ":", "(",
        ")", "[", "]", ",", " ", "round(", "min(", "max(", "clamp(", "len(", "upper(", "pow(", "str(", "number(",
        "contains(", "sqrt(", "cbrt(", "abs(", "é", "😀", "\u{0301}",
    ]

    @Test(arguments: [1, 2, 3, 4])
    func tokenSoupsNeverTrap(seed: UInt64) {
        var random = SplitMix64(state: seed)
        var parsed = 0
        for _ in 0..<3_000 {
            let count = Int(random.next() % 40)
            let text = (0..<count).map { _ in Self.pieces[Int(random.next() % UInt64(Self.pieces.count))] }.joined()
            check(text, &parsed, &random)
        }
        #expect(parsed > 0)
    }

    /// Random well-formed expressions (every operator and function, nested): each must parse, and
    /// evaluate to a value or a runtime error.
    @Test(arguments: [5, 6, 7])
    func wellFormedExpressionsParseAndEvaluate(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        func pick(_ options: [String]) -> String { options[Int(random.next() % UInt64(options.count))] }
        func generate(_ depth: Int) -> String {
            if depth == 0 || random.next() % 4 == 0 {
                return pick(["1", "-3", "2.5", "0", "'a'", "\"é\"", "true", "null", "x", "x.y", "items.@sum.price",
                             "items.@count", "items.1", "$value", "$0", "$1.k", "[1, 'b']", "9223372036854775807"])
            }
            switch random.next() % 4 {
            case 0:
                let op = pick(["+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "&&", "||", "and", "or"])
                return "(" + generate(depth - 1) + " " + op + " " + generate(depth - 1) + ")"
            case 1: return pick(["-", "!", "not "]) + generate(depth - 1)
            case 2: return "(" + generate(depth - 1) + " ? " + generate(depth - 1) + " : " + generate(depth - 1) + ")"
            default:
                let (name, arity) = [("round", 1), ("round", 2), ("floor", 1), ("ceil", 1), ("abs", 1), ("sqrt", 1),
                                     ("cbrt", 1), ("pow", 2), ("min", 3), ("max", 1), ("clamp", 3), ("len", 1),
                                     ("upper", 1), ("lower", 1), ("trim", 1), ("str", 1), ("number", 1),
                                     ("contains", 2)][Int(random.next() % 18)]
                return name + "(" + (0..<arity).map { _ in generate(depth - 1) }.joined(separator: ", ") + ")"
            }
        }
        var values = 0
        for _ in 0..<2_000 {
            let text = generate(6)
            let expression = try Expression.parse(text)
            do {
                _ = try expression.evaluate(variables: ["value": 7, "0": "s", "1": ["k": [1, 2]]]) { path in
                    path.string == "x" ? .int(Int64.max) : .array([["price": 1.5], "x", .null])
                }
                values += 1
            } catch {
                expectEqual(error.kind, .runtime, "\(text): \(error)")
            }
        }
        #expect(values > 200, "most random expressions have a value")
    }

    @Test func randomBytesNeverTrap() {
        var random = SplitMix64(state: 99)
        var parsed = 0
        for _ in 0..<3_000 {
            let bytes = (0..<Int(random.next() % 64)).map { _ in UInt8(truncatingIfNeeded: random.next() % 128) }
            check(String(decoding: bytes, as: UTF8.self), &parsed, &random)
        }
    }

    @Test func deepAndLongInputsAreRefusedNotOverflowed() {
        for text in [
            String(repeating: "(", count: 3_000) + "1" + String(repeating: ")", count: 3_000),
            String(repeating: "-", count: 3_000) + "1",
            String(repeating: "!", count: 3_000) + "x",
            String(repeating: "[", count: 3_000),
            String(repeating: "1 ? ", count: 1_000) + "1",
            String(repeating: "round(", count: 700),
            Array(repeating: "1", count: 2_000).joined(separator: "+"),
        ] {
            #expect(throws: ExpressionError.self) { try Expression.parse(text) }
        }
    }

    private func check(_ text: String, _ parsed: inout Int, _ random: inout SplitMix64) {
        do {
            let expression = try Expression.parse(text)
            parsed += 1
            let variables: [String: JSONValue] = ["value": .int(Int64(bitPattern: random.next())), "0": "s", "1": ["k": [1, 2]]]
            do {
                _ = try expression.evaluate(variables: variables) { _ in .array([1, .double(2.5), "x", .null]) }
            } catch {
                expectEqual(error.kind, .runtime)
            }
        } catch {
            expectEqual(error.kind, .syntax)
            #expect(error.column >= 1 && error.column <= text.count + 1, "\(text): \(error)")
        }
    }
}
