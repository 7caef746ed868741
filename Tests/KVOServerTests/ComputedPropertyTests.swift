import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Computed properties (keyPathsForValuesAffecting…, brought to the server): dependencies found from the
/// expression, chains (objc.io's LabColor), dependencies across references and collection operators,
/// `dependsOn`, notifications only when the computed value changes, one evaluation per change, and
/// history replay.
@Suite struct ComputedPropertyTests {
    let engine = KVOEngine()

    /// examples/LabColor.json, the class the README and the end-to-end tests use.
    static func labColorDefinition() throws -> String {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("examples/LabColor.json")
        return try String(contentsOf: url, encoding: .utf8)
    }

    /// The same conversion in Swift: CIE L*a*b* to XYZ (D65), as objc.io's LabColor does.
    static func lab(_ l: Double, _ a: Double, _ b: Double) -> (red: Double, green: Double, blue: Double, color: String) {
        func inverseF(_ t: Double) -> Double { t > 6.0 / 29 ? t * t * t : 3 * (6.0 / 29) * (6.0 / 29) * (t - 4.0 / 29) }
        let fy = (l + 16) / 116
        let red = 95.047 * inverseF(fy + a / 500)
        let green = 100 * inverseF(fy)
        let blue = 108.883 * inverseF(fy - b / 200)
        func byte(_ component: Double) -> Int { Int((min(max(component * 0.01, 0), 1) * 255).rounded()) }
        return (red, green, blue, "rgb(\(byte(red)), \(byte(green)), \(byte(blue)))")
    }

    private func number(_ value: JSONValue) -> Double? {
        switch value {
        case let .int(integer): return Double(integer)
        case let .double(double): return double
        default: return nil
        }
    }

    @Test func labColorChainsComputedProperties() throws {
        try engine.defineClass(json: try ComputedPropertyTests.labColorDefinition())
        try engine.create("c", of: "LabColor", ["lComponent": 60, "aComponent": 20, "bComponent": -30])
        var expected = ComputedPropertyTests.lab(60, 20, -30)
        expectEqual(try engine.value("c", "color"), .string(expected.color))
        #expect(abs(try #require(number(try engine.value("c", "redComponent"))) - expected.red) < 1e-9)
        let colorSub = try engine.observe("c", "color")
        let redSub = try engine.observe("c", "redComponent")
        let greenSub = try engine.observe("c", "greenComponent")

        let before = engine.computedMemo.evaluations
        let notifications = try engine.set("c", "lComponent", 70)
        #expect(engine.computedMemo.evaluations - before == 4,
                "red, green, blue and color are each evaluated once, however many readings need them")
        let old = expected
        expected = ComputedPropertyTests.lab(70, 20, -30)
        let bySub = Dictionary(uniqueKeysWithValues: notifications.map { ($0.recipients[0].subscription, $0) })
        expectEqual(notifications.count, 3)
        #expect(bySub[colorSub]?.old == .string(old.color) && bySub[colorSub]?.new == .string(expected.color))
        #expect(abs(try #require(bySub[redSub].flatMap { number($0.new) }) - expected.red) < 1e-9)
        #expect(abs(try #require(bySub[greenSub].flatMap { number($0.new) }) - expected.green) < 1e-9)
        #expect(notifications.allSatisfy { $0.kind == .setting && $0.reason == .valueChanged })

        // bComponent feeds blue (and so color) only: red and green observers hear nothing.
        let onlyBlue = try engine.set("c", "bComponent", -10)
        expectEqual(onlyBlue.map { $0.recipients[0].subscription }, [colorSub])
    }

    @Test func observersHearOnlyWhenTheComputedValueChanges() throws {
        try engine.defineClass(json: #"{"name": "P", "properties": {"age": {"type": "integer"}}, "computed": {"adult": "age >= 18"}}"#)
        try engine.create("p", of: "P", ["age": 20])
        try engine.observe("p", "adult")
        #expect(try engine.set("p", "age", 30).isEmpty, "adult stays true")
        let change = try #require(try engine.set("p", "age", 12).first)
        #expect(change.old == true && change.new == false)
    }

    @Test func dependenciesAcrossReferencesAndCollectionOperators() throws {
        try engine.defineClass(json: #"{"name": "Customer", "properties": {"first": {"type": "string"}, "last": {"type": "string"}}}"#)
        try engine.defineClass(json: """
            {"name": "Order",
             "properties": {"customer": {"type": "ref", "class": "Customer"}, "items": {"type": "array"}},
             "computed": {"customerName": "customer.first + ' ' + customer.last",
                          "total": "items.@sum.price", "size": "len(items)"}}
            """)
        try engine.create("ada", of: "Customer", ["first": "Ada", "last": "Lovelace"])
        try engine.create("bob", of: "Customer", ["first": "Bob", "last": "Dylan"])
        try engine.create("o", of: "Order", ["customer": .reference(to: "ada"), "items": [["price": 3], ["price": 4]]])
        try engine.observe("o", "customerName")
        try engine.observe("o", "total")

        var change = try #require(try engine.set("ada", "last", "Byron").first, "a write in the referenced object")
        #expect(change.keyPath == "customerName" && change.new == "Ada Byron")
        change = try #require(try engine.set("o", "customer", .reference(to: "bob")).first, "a re-pointed reference")
        #expect(change.old == "Ada Byron" && change.new == "Bob Dylan")
        #expect(try engine.set("ada", "first", "Augusta").isEmpty, "the old customer no longer matters")

        change = try #require(try engine.mutate("o", "items", .insert(indexes: nil, values: [["price": 10]])).first)
        #expect(change.keyPath == "total" && change.old == 7 && change.new == 17)
        change = try #require(try engine.set("o", "items.0.price", 5).first)
        expectEqual(change.new, 19)
        expectEqual(try engine.value("o", "size"), 3)
    }

    @Test func dependsOnMakesAWriteReEvaluateWithoutNotifyingWhenNothingChanged() throws {
        try engine.defineClass(json: """
            {"name": "Doc", "properties": {"title": {"type": "string"}, "version": {"type": "integer"}, "note": {"type": "string"}},
             "computed": {"heading": {"expression": "upper(title)", "dependsOn": ["version"]}}}
            """)
        try engine.create("d", of: "Doc", ["title": "kvo", "version": 1])
        try engine.observe("d", "heading")
        let before = engine.computedMemo.evaluations
        #expect(try engine.set("d", "version", 2).isEmpty)
        expectEqual(engine.computedMemo.evaluations, before + 1, "a write to a dependsOn key path re-evaluates")
        let unrelated = try engine.set("d", "note", "x")
        #expect(unrelated.isEmpty && engine.computedMemo.evaluations == before + 1, "other keys do not")
    }

    @Test func runtimeErrorsReadAsNull() throws {
        try engine.defineClass(json: #"{"name": "R", "computed": {"ratio": "a / b", "shout": "upper(a)"}}"#)
        #expect(throws: KVOError.self) { try engine.create("r", of: "R", ["a": 1, "b": 0]) }  // undefined properties
        try engine.defineClass(json: #"{"name": "S", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "computed": {"ratio": "a / b", "shout": "upper(a)"}}"#)
        try engine.create("s", of: "S", ["a": 1, "b": 0])
        expectEqual(try engine.value("s", "ratio"), .null, "division by zero")
        expectEqual(try engine.value("s", "shout"), .null, "a type error")
        try engine.set("s", "b", 4)
        expectEqual(try engine.value("s", "ratio"), 0.25)
    }

    @Test func resumingReplaysComputedValuesAsTheyWere() throws {
        try engine.defineClass(json: #"{"name": "T", "properties": {"c": {"type": "number"}}, "computed": {"f": "c * 9 / 5 + 32"}}"#)
        try engine.create("t", of: "T", ["c": 0])
        let since = engine.revision
        try engine.set("t", "c", 100)
        try engine.set("t", "c", 100)
        try engine.set("t", "c", -40)
        var notifications: [ChangeNotification] = []
        _ = try engine.observe("t", keyPath: try KeyPath("f"), options: [.new, .old], connection: ConnectionID(9),
                               sinceRev: since, notifications: &notifications)
        expectEqual(notifications.map(\.new), [212.0, -40.0])
        expectEqual(notifications.map(\.old), [32.0, 212.0])
    }
}
