import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Bad input never hurts: seeded random class definitions (mostly near-valid) and random objects
/// validated against the ones that are accepted. A definition is either accepted or refused with
/// `bad_request`, `invalid_expression` or `cycle`; validation either accepts or names a rule; nothing
/// traps.
@Suite struct ClassDefinitionFuzzTests {
    static let rules: Set<String> = ["type", "required", "min", "max", "minLength", "maxLength", "pattern", "enum",
                                     "class", "undefined", "readOnly"]

    @Test(arguments: [11, 12, 13])
    func randomDefinitionsAndValuesNeverTrap(seed: UInt64) {
        var random = SplitMix64(state: seed)
        func pick<T>(_ options: [T]) -> T { options[Int(random.next() % UInt64(options.count))] }
        func value() -> JSONValue {
            pick([.null, true, 0, -1, 3, 100, 2.5, -0.5, "", "a", "Ab", "é", [], [1], ["x", "y", "z"], [:],
                  ["$ref": "p1"], ["$ref": "ghost"], ["k": 1]])
        }
        func spec() -> JSONValue {
            var members: [String: JSONValue] = [:]
            if random.next() % 8 != 0 {
                members["type"] = .string(pick(["string", "number", "integer", "bool", "array", "object", "ref", "date"]))
            }
            for key in ["required", "min", "max", "minLength", "maxLength", "pattern", "enum", "items", "class", "default"]
            where random.next() % 5 == 0 {
                switch key {
                case "required": members[key] = pick([true, false, 1])
                case "pattern": members[key] = pick(["^[a-z]+$", "(", "a{2,}", "", "é"])
                case "enum": members[key] = .array((0..<Int(random.next() % 3)).map { _ in value() })
                case "items": members[key] = ["type": pick(["string", "number", "ref"]), "maxLength": 2]
                case "class": members[key] = pick(["P", "Q", 3])
                default: members[key] = value()
                }
            }
            return .object(members)
        }
        let catalog = ClassCatalog()
        var accepted: [ClassDefinition] = []
        for index in 0..<600 {
            var properties: [String: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 5) { properties[pick(["a", "b", "c", "$x", "1", "a.b", "@n", ""])] = spec() }
            var definition: [String: JSONValue] = ["name": .string(pick(["P", "Q", "C\(index)", "", "9x", "a b"])),
                                                   "properties": .object(properties)]
            if random.next() % 3 == 0 {
                definition["computed"] = .object([pick(["d", "a", "e"]): pick(["a + 1", "e * 2", "d", "upper(", 5, ["expression": "a", "dependsOn": ["b", "..", 3]]])])
            }
            if random.next() % 10 == 0 { definition["extra"] = 1 }
            do {
                let compiled = try CompiledClass(try ClassDefinition(json: .object(definition)))
                try? catalog.add(compiled)
                accepted.append(compiled.definition)
                #expect(try ClassDefinition(json: compiled.definition.json).json == compiled.definition.json,
                        "the canonical form round-trips")
            } catch {
                #expect([.badRequest, .invalidExpression, .cycle].contains(error.code), "\(definition): \(error)")
            }
        }
        #expect(accepted.count > 20)
        let classOf: ClassOfObject = { id in id == "p1" ? .exists(className: "P") : .missing }
        for definition in accepted {
            for _ in 0..<20 {
                var values: [String: JSONValue] = [:]
                for name in definition.properties.keys where random.next() % 2 == 0 { values[name] = value() }
                do {
                    _ = try definition.validateNewObject(values, classOf: classOf)
                } catch {
                    #expect(Self.rules.contains(error.rule), "\(error)")
                }
                if let name = definition.properties.keys.first {
                    do {
                        try definition.validate(property: name, value: value(), classOf: classOf)
                        try definition.validateArrayChange(property: name, newElements: [value()],
                                                           resultingCount: Int(random.next() % 4), classOf: classOf)
                    } catch {
                        #expect(Self.rules.contains(error.rule), "\(error)")
                    }
                }
            }
        }
    }
}
