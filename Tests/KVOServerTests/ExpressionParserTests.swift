import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The expression language's grammar: precedence and associativity, what a parse extracts, the
/// exact column of every kind of syntax error, and the limits that keep hostile input harmless.
@Suite struct ExpressionParserTests {
    /// The tree written with every operation in parentheses, so that grouping is visible.
    private static func render(_ node: ExpressionNode) -> String {
        switch node {
        case let .literal(value): return value.description
        case let .array(elements): return "[" + elements.map(render).joined(separator: ", ") + "]"
        case let .keyPath(path): return path.string
        case let .variable(name, keys, _): return "$" + ([name] + keys).joined(separator: ".")
        case let .unary(op, operand, _): return "(\(op.rawValue)\(render(operand)))"
        case let .binary(op, left, right, _): return "(\(render(left)) \(op.rawValue) \(render(right)))"
        case let .and(left, right): return "(\(render(left)) && \(render(right)))"
        case let .or(left, right): return "(\(render(left)) || \(render(right)))"
        case let .conditional(condition, then, otherwise):
            return "(\(render(condition)) ? \(render(then)) : \(render(otherwise)))"
        case let .call(function, arguments, _):
            return function.rawValue + "(" + arguments.map(render).joined(separator: ", ") + ")"
        }
    }

    /// The error parsing `text` gives, or nil when it parses.
    private static func parseError(_ text: String) -> ExpressionError? {
        do {
            _ = try Expression.parse(text)
            return nil
        } catch {
            return error
        }
    }

    @Test(arguments: [
        ("1 + 2 * 3", "(1 + (2 * 3))"),
        ("1 * 2 + 3", "((1 * 2) + 3)"),
        ("1 - 2 - 3", "((1 - 2) - 3)"),
        ("8 / 4 / 2", "((8 / 4) / 2)"),
        ("7 % 3 * 2", "((7 % 3) * 2)"),
        ("(1 + 2) * 3", "((1 + 2) * 3)"),
        ("a + b < c * d", "((a + b) < (c * d))"),
        ("a <= b >= c", "((a <= b) >= c)"),
        ("a == b < c", "(a == (b < c))"),
        ("a != b == c", "((a != b) == c)"),
        ("a > b != c <= d", "((a > b) != (c <= d))"),
        ("a && b == c", "(a && (b == c))"),
        ("a || b && c", "(a || (b && c))"),
        ("a && b || c && d", "((a && b) || (c && d))"),
        ("a or b and c", "(a || (b && c))"),
        ("a || b || c", "((a || b) || c)"),
        ("a ? b : c ? d : e", "(a ? b : (c ? d : e))"),
        ("a ? b ? c : d : e", "(a ? (b ? c : d) : e)"),
        ("a || b ? x + 1 : y", "((a || b) ? (x + 1) : y)"),
        ("-a * b", "((-a) * b)"),
        ("- -a", "(-(-a))"),
        ("!a == b", "((!a) == b)"),
        ("not a and b", "((!a) && b)"),
        ("!!a", "(!(!a))"),
        ("-round(x + 1, 2) * 2", "((-round((x + 1), 2)) * 2)"),
        ("max(1, a ? 2 : 3)", "max(1, (a ? 2 : 3))"),
        ("[1, a, 'b', []]", "[1, a, \"b\", []]"),
        ("$value.price * $0", "($value.price * $0)"),
        ("items.@sum.price + items.0.name", "(items.@sum.price + items.0.name)"),
        ("a.true + a.and", "(a.true + a.and)"),
        ("  1\t+\n2  ", "(1 + 2)"),
    ])
    func precedenceAndAssociativity(source: String, grouped: String) throws {
        expectEqual(Self.render(try Expression.parse(source).root), grouped)
    }

    @Test func operatorsCarryTheirColumn() throws {
        let expression = try Expression.parse("a +  b * -c")
        guard case let .binary(.add, _, .binary(.multiply, _, .unary(.negate, _, negateColumn), multiplyColumn), addColumn) = expression.root else {
            Issue.record("unexpected tree \(expression.root)")
            return
        }
        expectEqual([addColumn, multiplyColumn, negateColumn], [3, 8, 10])
    }

    @Test func literalsBecomeTheirValues() throws {
        let cases: [(String, String)] = [
            ("42", "42"), ("0", "0"), ("1.5", "1.5"), ("1e3", "1000.0"), ("2E-2", "0.02"), ("6.02e+23", "6.02e+23"),
            ("9223372036854775807", "9223372036854775807"), ("true", "true"), ("false", "false"), ("null", "null"),
            (#""a\\b\'c\"d\ne\tf\u00e9""#, #""a\\b'c\"d\ne\tfé""#), (#"'it\'s "x"'"#, #""it's \"x\"""#),
            (#"'\uD83D\uDE00'"#, #""😀""#), ("''", #""""#),
        ]
        for (source, json) in cases {
            let root = try Expression.parse(source).root
            guard case let .literal(value) = root else {
                Issue.record("\(source) parsed as \(root)")
                continue
            }
            expectEqual(value.description, json, "\(source)")
        }
    }

    @Test func keyPathsAreDeduplicatedInFirstAppearanceOrder() throws {
        let expression = try Expression.parse(
            "price * qty + items.@sum.price - price + $value.price + round(items.@count) + (qty ? address.city : items.0.name)")
        expectEqual(expression.keyPaths.map(\.string), ["price", "qty", "items.@sum.price", "items.@count", "address.city", "items.0.name"])
        expectEqual(expression.keyPaths[2].collectionOperator, .sum)
        expectEqual(expression.variables, ["value"])
    }

    @Test func variablesAreNotKeyPathsAndKeywordsAreNeither() throws {
        let expression = try Expression.parse("$0 + $1 * $value.x.0 + $12 + $0 > 0 and true or not null")
        #expect(expression.keyPaths.isEmpty)
        expectEqual(expression.variables, ["0", "1", "value", "12"])
        let functionsOnly = try Expression.parse("round(len(upper(s)))")
        expectEqual(functionsOnly.keyPaths.map(\.string), ["s"])
        #expect(functionsOnly.variables.isEmpty)
    }

    @Test func equalityAndDescriptions() throws {
        let source = "round(a / 3, 2)"
        #expect(try Expression.parse(source) == Expression.parse(source))
        #expect(try Expression.parse(source) != Expression.parse("round(a / 3, 1)"))
        expectEqual(try Expression.parse(source).description, source)
        let error = ExpressionError.syntax("expected ')' after the arguments of 'round'", at: 7)
        expectEqual(error.description, "at column 7: expected ')' after the arguments of 'round'")
    }

    @Test(arguments: [
        ("round(1,", 9, "expected an expression, found the end"),
        ("1 +* 2", 4, "expected an expression, found '*'"),
        ("foo(1)", 1, "unknown function 'foo'"),
        ("2 * foo(1)", 5, "unknown function 'foo'"),
        ("a.b(1)", 1, "unknown function 'a.b'"),
        ("'abc", 1, "unterminated string"),
        ("1 + \"ab\\\"", 5, "unterminated string"),
        ("'ab\\", 1, "unterminated string"),
        ("round(1 2)", 9, "expected ')' after the arguments of 'round', found '2'"),
        ("round(1, 2, 3)", 1, "'round' takes 1 or 2 arguments, not 3"),
        ("pow(2)", 1, "'pow' takes 2 arguments, not 1"),
        ("max()", 1, "'max' takes at least 1 argument, not 0"),
        ("1 + len(1, 2)", 5, "'len' takes 1 argument, not 2"),
        ("round(1,)", 9, "expected an expression, found ')'"),
        ("(1 + 2", 7, "expected ')' for the '(' at column 1, found the end"),
        ("1 2", 3, "expected an operator or the end, found '2'"),
        ("(1))", 4, "expected an operator or the end, found ')'"),
        ("", 1, "expected an expression, found the end"),
        ("   ", 4, "expected an expression, found the end"),
        ("and", 1, "expected an expression, found 'and'"),
        ("1 + or", 5, "expected an expression, found 'or'"),
        ("x and", 6, "expected an expression, found the end"),
        ("not", 4, "expected an expression, found the end"),
        ("true.x", 1, "'true' is a keyword and cannot start a key path"),
        ("1 + null.a", 5, "'null' is a keyword and cannot start a key path"),
        ("null(1)", 5, "expected an operator or the end, found '('"),
        ("a = 1", 3, "unexpected '=' (comparison is '==')"),
        ("a & b", 3, "unexpected '&' ('and' is '&&')"),
        ("a | b", 3, "unexpected '|' ('or' is '||')"),
        ("a # b", 3, "unexpected character '#'"),
        ("a.", 3, "expected a key after '.'"),
        ("a..b", 3, "expected a key after '.', found '.'"),
        ("a. b", 3, "expected a key after '.', found ' '"),
        ("a.@", 4, "expected a collection operator name after '@'"),
        ("1 + items.@foo", 5, "unknown collection operator '@foo' (known: @count, @sum, @avg, @min, @max, @unionOfObjects, @distinctUnionOfObjects, @unionOfArrays, @distinctUnionOfArrays)"),
        ("a.@count.x", 1, "'@count' must be the last key of a key path"),
        ("@sum", 1, "unexpected character '@'"),
        ("$", 2, "expected a variable name after '$'"),
        ("$ x", 2, "expected a variable name after '$', found ' '"),
        ("$1a", 3, "unexpected 'a' in the variable name"),
        ("$x.@sum", 4, "collection operators apply to key paths, not to variables"),
        ("12abc", 3, "unexpected 'a' after the number"),
        ("1e", 2, "unexpected 'e' after the number"),
        ("1.5.2", 4, "unexpected character '.'"),
        ("99999999999999999999", 1, "the integer 99999999999999999999 does not fit in 64 bits"),
        ("1 + 1e999", 5, "the number 1e999 is out of range"),
        ("'a\\qb'", 3, "unknown escape '\\q'"),
        ("'\\u12'", 2, "expected four hexadecimal digits after '\\u'"),
        ("'\\uD800'", 2, "\\uD800 is half of a surrogate pair"),
        ("'\\uDE00'", 2, "\\uDE00 is half of a surrogate pair"),
        ("a ? b", 6, "expected ':' for the '?' at column 3, found the end"),
        ("a ? b : ", 9, "expected an expression, found the end"),
        ("[1, 2", 6, "expected ']' after the elements of the array, found the end"),
        ("[1 2]", 4, "expected ']' after the elements of the array, found '2'"),
        ("'日本' + *", 8, "expected an expression, found '*'"),
        ("'e\u{301}' + *", 7, "expected an expression, found '*'"),
    ] as [(String, Int, String)])
    func syntaxErrorsPointAtTheirColumn(source: String, column: Int, message: String) {
        let error = Self.parseError(source)
        expectEqual(error, .syntax(message, at: column), "\(source)")
    }

    @Test func everyFunctionChecksItsArityAtItsName() throws {
        for function in ExpressionFunction.allCases {
            let name = function.rawValue
            let arguments = { (count: Int) in "1 + " + name + "(" + Array(repeating: "1", count: count).joined(separator: ", ") + ")" }
            _ = try Expression.parse(arguments(function.arity.lowerBound))
            if function.arity.upperBound < 10 { _ = try Expression.parse(arguments(function.arity.upperBound)) }
            for wrong in [function.arity.lowerBound - 1, min(function.arity.upperBound, 10) + 1] where !function.arity.contains(wrong) {
                let error = Self.parseError(arguments(wrong))
                #expect(error?.kind == .syntax && error?.column == 5, "\(name) with \(wrong) arguments")
                expectEqual(error?.message.hasPrefix("'\(name)' takes "), true, "\(error?.message ?? "no error")")
            }
        }
        #expect(Set(ExpressionFunction.allCases.map(\.rawValue)) == [
            "round", "floor", "ceil", "abs", "sqrt", "pow", "cbrt", "min", "max", "clamp",
            "len", "upper", "lower", "trim", "str", "number", "contains",
        ])
    }

    @Test func tenThousandNestedParenthesesAreASyntaxErrorNotACrash() {
        // 20,001 bytes: the length limit refuses it before the lexer even starts.
        let tooLong = String(repeating: "(", count: 10_000) + "1" + String(repeating: ")", count: 10_000)
        expectEqual(Self.parseError(tooLong)?.kind, .syntax)
        // 2,000 levels fit in 4096 bytes: the depth limit stops them at the 65th parenthesis.
        let deep = String(repeating: "(", count: 2_000) + "1" + String(repeating: ")", count: 2_000)
        expectEqual(Self.parseError(deep), .syntax("the expression nests deeper than 64 levels", at: 65))
    }

    @Test func theDepthLimitCountsEveryNestingConstruct() throws {
        let limit = Expression.maximumDepth
        func nested(_ open: String, _ inner: String, _ close: String, levels: Int) -> String {
            String(repeating: open, count: levels) + inner + String(repeating: close, count: levels)
        }
        // At the limit everything parses; one more level, or as many as the length limit allows,
        // fails where the 65th level starts.
        let cases: [(open: String, inner: String, close: String, width: Int, offset: Int)] = [
            ("(", "1", ")", 1, 1), ("[", "1", "]", 1, 1), ("abs(", "1", ")", 4, 4), ("-", "1", "", 1, 1),
            ("!", "1", "", 1, 1), ("not ", "1", "", 4, 1), ("a ? b : ", "c", "", 8, 3),
        ]
        for (open, inner, close, width, offset) in cases {
            _ = try Expression.parse(nested(open, inner, close, levels: limit))
            let mostLevels = (Expression.maximumSourceLength - inner.utf8.count) / (open.utf8.count + close.utf8.count)
            for levels in [limit + 1, mostLevels] {
                let error = Self.parseError(nested(open, inner, close, levels: levels))
                expectEqual(error, .syntax("the expression nests deeper than 64 levels", at: limit * width + offset), "\(open) \(levels)")
            }
        }
    }

    @Test func theNodeLimitStopsLongChains() throws {
        // n terms joined by '+' are 2n - 1 nodes: 512 terms fit in 1024, 513 do not. The 1025th node
        // is the '+' before the 513th term, at column 3 + 4 * 511.
        let terms = { (count: Int) in Array(repeating: "1", count: count).joined(separator: " + ") }
        let longest = try Expression.parse(terms(512))
        expectEqual(try longest.evaluate { _ in .null }, .int(512))
        expectEqual(Self.parseError(terms(513)), .syntax("the expression has more than 1024 parts", at: 2047))
        // An array literal of 1025 elements: the last element is the 1025th node.
        let elements = "[" + Array(repeating: "1", count: 1025).joined(separator: ",") + "]"
        expectEqual(Self.parseError(elements), .syntax("the expression has more than 1024 parts", at: 2 + 2 * 1024))
    }

    @Test func theSourceLengthIsLimitedInBytes() throws {
        _ = try Expression.parse("1" + String(repeating: " ", count: 4095))
        expectEqual(Self.parseError("1" + String(repeating: " ", count: 4096)), .syntax("the expression is longer than 4096 bytes", at: 4097))
        // Two bytes per 'é': the 2048th one (column 2049) holds the 4097th byte.
        _ = try Expression.parse("'" + String(repeating: "é", count: 2047) + "'")
        expectEqual(Self.parseError("'" + String(repeating: "é", count: 2048) + "'")?.column, 2049)
    }
}
