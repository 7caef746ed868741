import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// What expressions compute: the number rules, null propagation, truthiness and short-circuit,
/// every function, variables, runtime errors with their columns, and the LabColor formulas.
@Suite struct ExpressionEvaluationTests {
    /// The context object's key paths, by their text.
    private static let context: [String: JSONValue] = [
        "x": 7, "half": 0.5, "name": "Ada", "zero": 0, "nothing": .null, "flag": true,
        "items": [["price": 2], ["price": 3.5]], "items.@sum.price": 5.5, "items.@count": 2,
        "address": ["city": "Paris", "zip": "75001"], "address.city": "Paris", "smallest": .int(.min),
        "big": 1e308,
    ]

    private static func evaluate(_ source: String, variables: [String: JSONValue] = [:]) throws -> JSONValue {
        try Expression.parse(source).evaluate(variables: variables) { context[$0.string] ?? .null }
    }

    /// The runtime error evaluating `source` gives, or nil when it succeeds.
    private static func runtimeError(_ source: String) throws -> ExpressionError? {
        let expression = try Expression.parse(source)
        do {
            _ = try expression.evaluate { context[$0.string] ?? .null }
            return nil
        } catch {
            return error
        }
    }

    // Results are compared as JSON text, so that `3` (an int) and `3.0` (a double) differ.
    @Test(arguments: [
        // int op int stays int; `/` is always a double; mixed gives double.
        ("1 + 2", "3"), ("5 - 8", "-3"), ("6 * 7", "42"), ("7 % 3", "1"), ("-7 % 3", "-1"), ("7 % -3", "1"),
        ("7 / 2", "3.5"), ("6 / 2", "3.0"), ("1 + 2.0", "3.0"), ("2 * 0.25", "0.5"), ("1 - 2.5", "-1.5"),
        ("7.5 % 2", "1.5"), ("x * half", "3.5"), ("-9223372036854775807 - 1", "-9223372036854775808"),
        ("-x", "-7"), ("-half", "-0.5"), ("- -x", "7"),
        // Precedence and associativity, evaluated.
        ("1 + 2 * 3", "7"), ("(1 + 2) * 3", "9"), ("10 - 4 - 3", "3"), ("2 * 3 % 4", "2"), ("100 / 10 / 5", "2.0"),
        ("-2 * -3", "6"), ("1 + 1 == 2 && 3 > 2", "true"), ("false ? 1 : true ? 2 : 3", "2"), ("true ? false ? 1 : 2 : 3", "2"),
        // Concatenation.
        ("'a' + 'b'", "\"ab\""), ("'a' + 1", "\"a1\""), ("1 + 'a'", "\"1a\""), ("'x' + 2.5", "\"x2.5\""),
        ("'x' + 6 / 2", "\"x3\""), ("'x' + 1e18", "\"x1000000000000000000\""), ("'x' + 1e20", "\"x1e+20\""), ("'x' + 1e300", "\"x1e+300\""),
        ("'x' + true", "\"xtrue\""), ("name + ' ' + x", "\"Ada 7\""), ("1 + 2 + 'a'", "\"3a\""), ("'a' + 1 + 2", "\"a12\""),
        // Null propagation.
        ("null + 1", "null"), ("1 - null", "null"), ("nothing * 2", "null"), ("2 / nothing", "null"), ("null % 0", "null"),
        ("'a' + null", "null"), ("null + 'a'", "null"), ("-null", "null"), ("missing + 1", "null"), ("null * 'a'", "null"),
        // Ordering: numbers with numbers, strings with strings, else null.
        ("1 < 2", "true"), ("2 <= 2.0", "true"), ("3 > 2.5", "true"), ("2 >= 3", "false"), ("2.5 > 3", "false"),
        ("'a' < 'b'", "true"), ("'Z' < 'a'", "true"), ("'é' > 'z'", "true"), ("'ab' <= 'a'", "false"), ("'' < 'a'", "true"),
        ("1 < 'a'", "null"), ("null < 1", "null"), ("nothing >= 0", "null"), ("true < false", "null"), ("[1] < [2]", "null"),
        // Equality of any two values.
        ("1 == 1.0", "true"), ("'1' == 1", "false"), ("null == null", "true"), ("nothing == null", "true"),
        ("[1, 2] == [1, 2.0]", "true"), ("1 != 2", "true"), ("null != 0", "true"), ("name == 'Ada'", "true"),
        ("items == [1]", "false"),
        // Logic returns bools.
        ("1 && 'x'", "true"), ("0 || ''", "false"), ("null or 5", "true"), ("x and nothing", "false"),
        ("!0", "true"), ("!0.0", "true"), ("not 'a'", "false"), ("![]", "false"), ("!''", "true"),
        ("0.0 ? 1 : 2", "2"), ("'' ? 1 : 2", "2"), ("[] ? 1 : 2", "1"), ("address ? 1 : 2", "1"), ("'0' ? 1 : 2", "1"),
        // Literals and key paths.
        ("[x, name, [null]]", "[7,\"Ada\",[null]]"), ("items.@sum.price * 2", "11.0"), ("address.city + '!'", "\"Paris!\""),
    ] as [(String, String)])
    func operators(source: String, json: String) throws {
        expectEqual(try Self.evaluate(source).description, json, "\(source)")
    }

    @Test(arguments: [
        ("round(2.5)", "3"), ("round(-2.5)", "-3"), ("round(2.4)", "2"), ("round(7)", "7"), ("round(1e300)", "1e+300"),
        ("round(3.14159, 2)", "3.14"), ("round(2.5, 0)", "3.0"), ("round(-1.005, 1)", "-1.0"), ("round(5, 1)", "5"),
        ("round(1234, -2)", "1200"), ("round(1250, -2)", "1300"), ("round(-1250, -2)", "-1300"), ("round(1234.5, -2)", "1200.0"),
        ("round(0.5, 400)", "0.5"), ("round(12, -400)", "0"), ("round(null)", "null"), ("round(1.5, null)", "null"),
        ("floor(2.7)", "2"), ("floor(-2.1)", "-3"), ("floor(4)", "4"), ("ceil(2.1)", "3"), ("ceil(-2.7)", "-2"), ("ceil(nothing)", "null"),
        ("abs(-3)", "3"), ("abs(-2.5)", "2.5"), ("abs(4)", "4"), ("abs(null)", "null"),
        ("sqrt(16)", "4.0"), ("sqrt(2.25)", "1.5"), ("cbrt(8)", "2.0"), ("cbrt(-8)", "-2.0"), ("sqrt(null)", "null"),
        ("pow(2, 10)", "1024.0"), ("pow(4, 0.5)", "2.0"), ("pow(2, -1)", "0.5"), ("pow(null, 2)", "null"),
        ("min(3, 1, 2)", "1"), ("max(3, 1.5, 2)", "3"), ("min([4, 2.5, 8])", "2.5"), ("max(null, 2, null)", "null"), ("max([null, 2, null])", "2"),
        ("min(null)", "null"), ("min([])", "null"), ("max(7)", "7"), ("min(1, 1.0)", "1"), ("max(x, half)", "7"),
        ("max([1, null, 9])", "9"), ("min(-1, -1.5)", "-1.5"),
        ("max(9007199254740992.0, 9007199254740993)", "9007199254740993"), ("9007199254740993 > 9007199254740992.0", "true"),
        ("min(9007199254740993, 9007199254740992.0)", "9007199254740992.0"), ("clamp(9007199254740993, 0, 9007199254740992.0)", "9007199254740992.0"),
        ("clamp(5, 0, 3)", "3"), ("clamp(-1, 0, 3)", "0"), ("clamp(2.5, 0, 3)", "2.5"), ("clamp(1, 1, 1)", "1"), ("clamp(null, 0, 1)", "null"),
        ("len('héllo')", "5"), ("len('e\\u0301')", "1"), ("len('')", "0"), ("len([1, 2, 3])", "3"), ("len(address)", "2"), ("len(nothing)", "null"),
        ("upper('abc')", "\"ABC\""), ("lower('ÀB')", "\"àb\""), ("trim('  a b \\n\\t')", "\"a b\""), ("trim('   ')", "\"\""), ("upper(null)", "null"),
        ("str(1)", "\"1\""), ("str(2.5)", "\"2.5\""), ("str(6 / 3)", "\"2\""), ("str(true)", "\"true\""), ("str('x')", "\"x\""),
        ("str([1, 'a'])", "\"[1,\\\"a\\\"]\""), ("str(null)", "null"),
        ("number('42')", "42"), ("number(' -3.5 ')", "-3.5"), ("number('1e3')", "1000.0"), ("number('+7')", "7"),
        ("number('99999999999999999999')", "1e+20"), ("number('abc')", "null"), ("number('')", "null"), ("number('inf')", "null"),
        ("number('nan')", "null"), ("number('0x10')", "null"), ("number('1.')", "null"), ("number('1e999')", "null"),
        ("number(7)", "7"), ("number(true)", "null"), ("number(null)", "null"),
        ("contains('hello', 'ell')", "true"), ("contains('hello', 'z')", "false"), ("contains([1, 2, 3], 2.0)", "true"),
        ("contains([1, null], null)", "true"), ("contains([1], 'a')", "false"), ("contains(null, 1)", "null"), ("contains('a', null)", "null"),
    ] as [(String, String)])
    func functions(source: String, json: String) throws {
        expectEqual(try Self.evaluate(source).description, json, "\(source)")
    }

    @Test(arguments: [
        ("'a' * 2", 5, "'*' needs numbers, not string and number"),
        ("true + 1", 6, "'+' needs numbers or a string, not bool and number"),
        ("[1] - 1", 5, "'-' needs numbers, not array and number"),
        ("'a' + [1]", 5, "'+' cannot join string and array"),
        ("address + '!'", 9, "'+' cannot join object and string"),
        ("1 / 0", 3, "division by zero"), ("1.5 / 0.0", 5, "division by zero"), ("x / zero", 3, "division by zero"),
        ("1 % 0", 3, "remainder of a division by zero"), ("1.5 % 0", 5, "remainder of a division by zero"),
        ("9223372036854775807 + 1", 21, "integer overflow in '+'"),
        ("-9223372036854775807 - 2", 22, "integer overflow in '-'"),
        ("3037000500 * 3037000500", 12, "integer overflow in '*'"),
        ("1 + -smallest", 5, "integer overflow in '-'"),
        ("big * 10", 5, "the result of '*' is not a finite number"),
        ("big + big", 5, "the result of '+' is not a finite number"),
        ("-'a'", 1, "'-' needs a number, not string"),
        ("upper(3)", 1, "'upper' needs a string, not number"),
        ("1 + lower(x)", 5, "'lower' needs a string, not number"),
        ("trim(true)", 1, "'trim' needs a string, not bool"),
        ("round('x')", 1, "'round' needs a number, not string"),
        ("round(1.5, 0.5)", 1, "'round' needs an integer number of digits, not 0.5"),
        ("round(1.7e308, -308)", 1, "the result of 'round' is not a finite number"),
        ("floor([])", 1, "'floor' needs a number, not array"),
        ("abs(smallest)", 1, "integer overflow in 'abs'"),
        ("abs('x')", 1, "'abs' needs a number, not string"),
        ("sqrt(-1)", 1, "the result of 'sqrt' is not a finite number"),
        ("pow(10, 400)", 1, "the result of 'pow' is not a finite number"),
        ("pow(2, 'a')", 1, "'pow' needs a number, not string"),
        ("cbrt(name)", 1, "'cbrt' needs a number, not string"),
        ("min('a', 1)", 1, "'min' needs numbers, not string"),
        ("max([1, [2]])", 1, "'max' needs numbers, not array"),
        ("clamp(1, 3, 2)", 1, "'clamp' needs lo <= hi, not 3 > 2"),
        ("clamp('a', 0, 1)", 1, "'clamp' needs numbers, not string"),
        ("len(5)", 1, "'len' needs a string, array or object, not number"),
        ("contains(5, 1)", 1, "'contains' needs a string or an array, not number"),
        ("contains('a', 1)", 1, "'contains' needs a string to look for in a string, not number"),
        ("x + $nope", 5, "unknown variable '$nope'"),
    ] as [(String, Int, String)])
    func runtimeErrorsPointAtTheirNode(source: String, column: Int, message: String) throws {
        expectEqual(try Self.runtimeError(source), .runtime(message, at: column), "\(source)")
    }

    @Test func truthiness() {
        let falsy: [JSONValue] = [.null, false, 0, 0.0, -0.0, ""]
        let truthy: [JSONValue] = [true, 1, -1, 0.5, "0", " ", "false", [], [0], [:], ["a": .null]]
        for value in falsy { #expect(!Expression.isTruthy(value), "\(value)") }
        for value in truthy { #expect(Expression.isTruthy(value), "\(value)") }
    }

    @Test(arguments: [
        ("false && a", [String]()), ("zero && a", ["zero"]), ("x && a", ["x", "a"]), ("nothing and a", ["nothing"]),
        ("true || a", []), ("x || a", ["x"]), ("zero || a", ["zero", "a"]), ("x or a", ["x"]),
        ("flag ? a : b", ["flag", "a"]), ("zero ? a : b", ["zero", "b"]), ("x ? (zero ? a : b) : c", ["x", "zero", "b"]),
        ("a + a + b", ["a", "a", "b"]), ("round(x, zero) + x", ["x", "zero", "x"]), ("[a, nothing, a]", ["a", "nothing", "a"]),
    ])
    func keyPathsAreReadOncePerOccurrenceReached(source: String, lookups: [String]) throws {
        let expression = try Expression.parse(source)
        var seen: [String] = []
        _ = try expression.evaluate { path in
            seen.append(path.string)
            return Self.context[path.string] ?? .null
        }
        expectEqual(seen, lookups, "\(source)")
    }

    @Test func variablesAndTheirKeys() throws {
        let variables: [String: JSONValue] = [
            "value": ["items": [["name": "a"], ["name": "b"]], "0": "zero key", "n": 5],
            "0": 20, "1": 22, "list": [10, 20],
        ]
        let cases: [(String, JSONValue)] = [
            ("$0 + $1", 42), ("$value.n * 2", 10), ("$value.items.1.name", "b"), ("$value.0", "zero key"),
            ("$list.1", 20), ("$list.2", .null), ("$list.01", .null), ("$list.x", .null), ("$value.missing", .null),
            ("$value.n.deeper", .null), ("$value.items.name", .null), ("$value.missing + 1", .null),
        ]
        for (source, expected) in cases {
            expectEqual(try Expression.parse(source).evaluate(variables: variables) { _ in .null }, expected, "\(source)")
        }
        let unknown = try Expression.parse("$value + $missing")
        #expect(throws: ExpressionError.runtime("unknown variable '$missing'", at: 10)) {
            try unknown.evaluate(variables: variables) { _ in .null }
        }
    }

    @Test func evaluationCanBeRepeatedWithNewValues() throws {
        let expression = try Expression.parse("price * qty > 100 ? 'bulk' : 'retail'")
        let small: [String: JSONValue] = ["price": 3, "qty": 4]
        let large: [String: JSONValue] = ["price": 30, "qty": 4.5]
        expectEqual(try expression.evaluate { small[$0.string] ?? .null }, "retail")
        expectEqual(try expression.evaluate { large[$0.string] ?? .null }, "bulk")
        expectEqual(try expression.evaluate { _ in .null }, "retail")
    }

    /// objc.io's LabColor: red, green and blue computed from L, a and b (CIE L*a*b* → XYZ with the
    /// D65 white point → linear sRGB), once in the expression language and once in Swift.
    @Test(arguments: [(50.0, 20.0, -30.0), (5.0, 0.0, 0.0), (97.5, -12.25, 60.0)])
    func labColorFormulas(l: Double, a: Double, b: Double) throws {
        func inverseF(_ t: Double) -> Double { t > 6.0 / 29.0 ? t * t * t : 3.0 * (6.0 / 29.0) * (6.0 / 29.0) * (t - 4.0 / 29.0) }
        let fy = (l + 16.0) / 116.0
        let (x, y, z) = (95.047 * inverseF(fy + a / 500.0), 100.0 * inverseF(fy), 108.883 * inverseF(fy - b / 200.0))
        let expected = [
            "red": (3.2406 * x - 1.5372 * y - 0.4986 * z) / 100.0,
            "green": (-0.9689 * x + 1.8758 * y + 0.0415 * z) / 100.0,
            "blue": (0.0557 * x - 0.2040 * y + 1.0570 * z) / 100.0,
        ]

        func inverseFSource(_ t: String) -> String { "(\(t) > 6 / 29 ? pow(\(t), 3) : 3 * pow(6 / 29, 2) * (\(t) - 4 / 29))" }
        let fySource = "((L + 16) / 116)"
        let xSource = "95.047 * " + inverseFSource("(\(fySource) + a / 500)")
        let ySource = "100 * " + inverseFSource(fySource)
        let zSource = "108.883 * " + inverseFSource("(\(fySource) - b / 200)")
        let sources = [
            "red": "(3.2406 * \(xSource) - 1.5372 * \(ySource) - 0.4986 * \(zSource)) / 100",
            "green": "(-0.9689 * \(xSource) + 1.8758 * \(ySource) + 0.0415 * \(zSource)) / 100",
            "blue": "(0.0557 * \(xSource) - 0.2040 * \(ySource) + 1.0570 * \(zSource)) / 100",
        ]
        // Integral components are given as ints, as a client would store them.
        let components: [String: JSONValue] = ["L": JSONValue.integral(l), "a": JSONValue.integral(a), "b": JSONValue.integral(b)]
        for (name, source) in sources {
            let expression = try Expression.parse(source)
            expectEqual(expression.keyPaths.map(\.string), ["L", "a", "b"])
            let value = try expression.evaluate { components[$0.string] ?? .null }
            guard case let .double(computed) = value, let wanted = expected[name] else {
                Issue.record("\(name) gave \(value)")
                continue
            }
            #expect(abs(computed - wanted) <= 1e-12 * max(1, abs(wanted)), "\(name): \(computed) vs \(wanted)")
        }
    }
}
