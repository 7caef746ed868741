import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The failure `body` throws, or nil when it accepts.
private func failure(_ body: () throws(ValidationFailure) -> Void) -> ValidationFailure? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}

/// Validation of values against a class: every rule accepted and refused at its boundary, defaults,
/// required, references, array elements and counts, read-only and undefined properties.
@Suite struct ObjectValidatorTests {
    /// The objects that exist, with their classes (nil: no class).
    static let objects: [String: String?] = ["ada": "Person", "rex": "Dog", "plain": nil]
    let classOf: ClassOfObject = { ObjectValidatorTests.lookUp($0) }

    static func lookUp(_ id: String) -> ReferencedObject {
        objects[id].map { .exists(className: $0) } ?? .missing
    }
    let color: ClassDefinition

    init() throws {
        color = try ClassDefinition(json: JSONParser.parse(#"""
            {"name": "LabColor",
             "properties": {
               "L":      {"type": "number", "min": 0, "max": 100, "default": 50, "required": true},
               "name":   {"type": "string", "minLength": 1, "maxLength": 3},
               "code":   {"type": "string", "pattern": "^[a-z ]+$"},
               "word":   {"type": "string", "pattern": "b+"},
               "mode":   {"type": "string", "enum": ["lab", "lch"]},
               "weight": {"type": "number", "enum": [1, 2.5]},
               "count":  {"type": "integer", "min": 0, "max": 9007199254740992.0},
               "on":     {"type": "bool", "default": false},
               "tags":   {"type": "array", "items": {"type": "string", "maxLength": 8}, "minLength": 1, "maxLength": 3},
               "list":   {"type": "array"},
               "meta":   {"type": "object"},
               "owner":  {"type": "ref", "class": "Person"},
               "friends":{"type": "array", "items": {"type": "ref", "class": "Person"}}
             },
             "computed": {"red": {"expression": "L * 2.55", "dependsOn": ["L"]}, "label": "upper(name)"}}
            """#))
    }

    /// The failure of setting the whole `property` to `value`, or nil when accepted.
    private func setting(_ property: String, _ value: JSONValue) -> ValidationFailure? {
        failure { () throws(ValidationFailure) in try color.validate(property: property, value: value, classOf: classOf) }
    }

    // MARK: - Rules at their boundaries

    @Test func minAndMaxAreInclusive() {
        for accepted: JSONValue in [0, 0.0, 50, 99.5, 100, 100.0] { #expect(setting("L", accepted) == nil, "\(accepted)") }
        expectEqual(setting("L", -0.001), ValidationFailure(property: "L", rule: "min", message: "'L' must be at least 0 (got -0.001)"))
        expectEqual(setting("L", -1)?.rule, "min")
        expectEqual(setting("L", 100.5)?.rule, "max")
        expectEqual(setting("L", 120), ValidationFailure(property: "L", rule: "max", message: "'L' must be at most 100 (got 120)"))
    }

    @Test func numbersAreComparedExactlyBeyondDoublePrecision() {
        // 2^53 + 1 rounds to 2^53 as a double; compared exactly it is above the maximum 2^53.
        expectEqual(setting("count", .int(9_007_199_254_740_992)), nil)
        expectEqual(setting("count", .int(9_007_199_254_740_993))?.rule, "max")
        expectEqual(setting("count", .int(Int64.max))?.rule, "max")
    }

    @Test func typesAreChecked() {
        expectEqual(setting("L", "50"), ValidationFailure(property: "L", rule: "type", message: "'L' must be a number (got a string)"))
        expectEqual(setting("name", 5), ValidationFailure(property: "name", rule: "type", message: "'name' must be a string (got 5)"))
        expectEqual(setting("on", true), nil)
        expectEqual(setting("on", "true")?.rule, "type")
        expectEqual(setting("on", 1)?.rule, "type")
        expectEqual(setting("list", []), nil)
        expectEqual(setting("list", ["a": 1])?.rule, "type")
        expectEqual(setting("meta", ["a": 1]), nil)
        expectEqual(setting("meta", [:]), nil)
        expectEqual(setting("meta", ["$ref": "ada"]), ValidationFailure(property: "meta", rule: "type", message: "'meta' must be an object (got a reference)"))
        expectEqual(setting("meta", [1])?.rule, "type")
    }

    @Test func integerAcceptsIntegralDoublesOnly() {
        expectEqual(setting("count", 3), nil)
        expectEqual(setting("count", 3.0), nil)
        expectEqual(setting("count", 3.5), ValidationFailure(property: "count", rule: "type", message: "'count' must be an integer (got 3.5)"))
        expectEqual(setting("count", "3")?.rule, "type")
        expectEqual(setting("count", -1)?.rule, "min")
    }

    @Test func stringLengthCountsCharacters() {
        let composed = "\u{E9}"     // é as one scalar
        let decomposed = "e\u{301}"  // e + combining acute: two scalars, one Character
        expectEqual(setting("name", .string(composed)), nil)
        expectEqual(setting("name", .string(decomposed)), nil)
        expectEqual(setting("name", .string(decomposed + decomposed + decomposed)), nil, "6 scalars, 3 Characters")
        expectEqual(setting("name", "🇳🇴🇳🇴🇳🇴"), nil, "flags are one Character each")
        expectEqual(setting("name", "abc"), nil)
        expectEqual(setting("name", ""), ValidationFailure(property: "name", rule: "minLength", message: "'name' must be at least 1 character long (got 0)"))
        expectEqual(setting("name", "abcd"), ValidationFailure(property: "name", rule: "maxLength", message: "'name' must be at most 3 characters long (got 4)"))
        expectEqual(setting("name", .string(decomposed + "bcd"))?.rule, "maxLength")
    }

    @Test func arrayLengthCountsElements() {
        expectEqual(setting("tags", ["a"]), nil)
        expectEqual(setting("tags", ["a", "b", "c"]), nil)
        expectEqual(setting("tags", []), ValidationFailure(property: "tags", rule: "minLength", message: "'tags' must have at least 1 element (got 0)"))
        expectEqual(setting("tags", ["a", "b", "c", "d"]), ValidationFailure(property: "tags", rule: "maxLength", message: "'tags' must have at most 3 elements (got 4)"))
    }

    @Test func patternsMatchAnywhereUnlessAnchored() {
        expectEqual(setting("word", "abba"), nil)
        expectEqual(setting("word", "b"), nil)
        expectEqual(setting("word", "ac"), ValidationFailure(property: "word", rule: "pattern", message: #"'word' must match the pattern b+ (got "ac")"#))
        expectEqual(setting("code", "lab color"), nil)
        expectEqual(setting("code", "Lab")?.rule, "pattern")
        expectEqual(setting("code", "lab1")?.rule, "pattern", "anchored at the end")
        expectEqual(setting("code", "1lab")?.rule, "pattern", "anchored at the start")
        expectEqual(setting("code", "")?.rule, "pattern")
    }

    @Test func enumComparesAsJSONValues() {
        expectEqual(setting("mode", "lab"), nil)
        expectEqual(setting("mode", "lch"), nil)
        expectEqual(setting("mode", "LAB"), ValidationFailure(property: "mode", rule: "enum", message: #"'mode' must be one of "lab", "lch""#))
        // An int and a double listed: numbers compare by value.
        expectEqual(setting("weight", 1), nil)
        expectEqual(setting("weight", 1.0), nil)
        expectEqual(setting("weight", 2.5), nil)
        expectEqual(setting("weight", 2), ValidationFailure(property: "weight", rule: "enum", message: "'weight' must be one of 1, 2.5"))
        expectEqual(setting("weight", "1")?.rule, "type")
    }

    @Test func nullPassesEveryRuleOfANonRequiredProperty() {
        for property in ["name", "code", "word", "mode", "weight", "count", "on", "tags", "meta", "owner", "friends"] {
            expectEqual(setting(property, .null), nil, "\(property)")
        }
        expectEqual(setting("L", .null), ValidationFailure(property: "L", rule: "required", message: "'L' is required"))
    }

    // MARK: - References

    @Test func referencesMustNameAnExistingObjectOfTheClass() {
        expectEqual(setting("owner", ["$ref": "ada"]), nil)
        expectEqual(setting("owner", ["$ref": "nobody"]), ValidationFailure(property: "owner", rule: "class", message: "'owner' refers to 'nobody', which does not exist"))
        expectEqual(setting("owner", ["$ref": "rex"]), ValidationFailure(property: "owner", rule: "class", message: "'owner' must refer to an object of class Person ('rex' has class Dog)"))
        expectEqual(setting("owner", ["$ref": "plain"]), ValidationFailure(property: "owner", rule: "class", message: "'owner' must refer to an object of class Person ('plain' has no class)"))
        expectEqual(setting("owner", "ada"), ValidationFailure(property: "owner", rule: "type", message: #"'owner' must be a reference {"$ref": "<id>"} (got a string)"#))
        expectEqual(setting("owner", ["$ref": "ada", "x": 1])?.rule, "type", "exactly the $ref member")
        expectEqual(setting("owner", ["$ref": 1])?.rule, "type")
        expectEqual(setting("owner", ["ref": "ada"])?.rule, "type")
    }

    @Test func everyElementOfAWholeArrayIsChecked() {
        expectEqual(setting("friends", [["$ref": "ada"], .null]), nil)
        #expect(setting("friends", [["$ref": "ada"], ["$ref": "rex"]])
            == ValidationFailure(property: "friends", rule: "class", message: "'friends.1' must refer to an object of class Person ('rex' has class Dog)"))
        #expect(setting("tags", ["ok", "waytoolong"])
            == ValidationFailure(property: "tags", rule: "maxLength", message: "'tags.1' must be at most 8 characters long (got 10)"))
        expectEqual(setting("tags", ["12345678"]), nil)
        expectEqual(setting("tags", [1])?.rule, "type")
    }

    // MARK: - Read-only and undefined

    @Test func computedPropertiesAreReadOnlyAndUnknownOnesUndefined() {
        expectEqual(setting("red", 1), ValidationFailure(property: "red", rule: "readOnly", message: "'red' is a computed property and read-only"))
        expectEqual(setting("label", "x")?.rule, "readOnly")
        expectEqual(setting("nope", 1), ValidationFailure(property: "nope", rule: "undefined", message: "class LabColor has no property 'nope'"))
        #expect(failure { () throws(ValidationFailure) in
            try color.validateInnerWrite(property: "red", innerPath: ["x"], value: 1, classOf: classOf)
        }?.rule == "readOnly")
        #expect(failure { () throws(ValidationFailure) in
            try color.validateInnerWrite(property: "nope", innerPath: ["x"], value: 1, classOf: classOf)
        }?.rule == "undefined")
        #expect(failure { () throws(ValidationFailure) in
            try color.validateArrayChange(property: "label", newElements: ["x"], resultingCount: 1, classOf: classOf)
        }?.rule == "readOnly")
        #expect(failure { () throws(ValidationFailure) in
            try color.validateArrayChange(property: "nope", newElements: ["x"], resultingCount: 1, classOf: classOf)
        }?.rule == "undefined")
    }

    // MARK: - create

    @Test func createFillsInDefaultsForAbsentProperties() throws {
        let stored = try color.validateNewObject(["name": "ab"], classOf: classOf)
        expectEqual(stored, ["name": "ab", "L": 50, "on": false])
        // Given values win over defaults; null is a value, not an absence.
        expectEqual(try color.validateNewObject(["L": 7, "on": .null], classOf: classOf), ["L": 7, "on": .null])
    }

    @Test func createChecksEveryValue() {
        let create = { (values: [String: JSONValue]) in
            failure { () throws(ValidationFailure) in _ = try color.validateNewObject(values, classOf: classOf) }
        }
        expectEqual(create(["L": 101]), ValidationFailure(property: "L", rule: "max", message: "'L' must be at most 100 (got 101)"))
        expectEqual(create(["tags": ["a", 2]])?.rule, "type")
        expectEqual(create(["owner": ["$ref": "nobody"]])?.rule, "class")
        expectEqual(create(["mode": "lab", "red": 3]), ValidationFailure(property: "red", rule: "readOnly", message: "'red' is a computed property and read-only"))
        expectEqual(create(["mode": "lab", "hue": 3]), ValidationFailure(property: "hue", rule: "undefined", message: "class LabColor has no property 'hue'"))
        // An undefined property is reported before a bad value.
        expectEqual(create(["L": 101, "hue": 3])?.rule, "undefined")
        expectEqual(create(["L": .null]), ValidationFailure(property: "L", rule: "required", message: "'L' is required"))
        expectEqual(create([:]), nil)
    }

    @Test func requiredWithoutDefaultMustBeGiven() throws {
        let person = try ClassDefinition(json: JSONParser.parse(#"""
            {"name": "Person", "properties": {
               "id":    {"type": "string", "required": true},
               "boss":  {"type": "ref", "class": "Person", "default": {"$ref": "ada"}},
               "buddy": {"type": "ref", "class": "Person"}}}
            """#))
        #expect(failure { () throws(ValidationFailure) in _ = try person.validateNewObject([:], classOf: classOf) }
            == ValidationFailure(property: "id", rule: "required", message: "'id' is required"))
        expectEqual(failure { () throws(ValidationFailure) in _ = try person.validateNewObject(["id": .null], classOf: classOf) }?.rule, "required")
        expectEqual(try person.validateNewObject(["id": "p1"], classOf: classOf), ["id": "p1", "boss": ["$ref": "ada"]])
        expectEqual(failure { () throws(ValidationFailure) in try person.validate(property: "id", value: .null, classOf: classOf) }?.rule, "required")
        // A filled-in reference default is checked against the objects that exist now.
        let noAda: ClassOfObject = { $0 == "ada" ? .missing : ObjectValidatorTests.lookUp($0) }
        #expect(failure { () throws(ValidationFailure) in _ = try person.validateNewObject(["id": "p1"], classOf: noAda) }
            == ValidationFailure(property: "boss", rule: "class", message: "'boss' refers to 'ada', which does not exist"))
        expectEqual(try person.validateNewObject(["id": "p1", "boss": .null], classOf: noAda), ["id": "p1", "boss": .null])
    }

    // MARK: - Writes inside a property

    @Test func innerWriteOfOneElementIsCheckedAgainstItems() {
        let write = { (property: String, innerPath: [String], value: JSONValue) in
            failure { () throws(ValidationFailure) in
                try color.validateInnerWrite(property: property, innerPath: innerPath, value: value, classOf: classOf)
            }
        }
        expectEqual(write("tags", ["2"], "ok"), nil)
        expectEqual(write("tags", ["2"], .null), nil)
        expectEqual(write("tags", ["2"], 5), ValidationFailure(property: "tags", rule: "type", message: "'tags.2' must be a string (got 5)"))
        expectEqual(write("tags", ["0"], "waytoolong")?.rule, "maxLength")
        expectEqual(write("friends", ["0"], ["$ref": "plain"])?.rule, "class")
        expectEqual(write("friends", ["0"], ["$ref": "ada"]), nil)
        // Not one element (deeper, or not an index), or no items, or an object property: nothing to check.
        expectEqual(write("tags", ["2", "x"], 5), nil)
        expectEqual(write("tags", ["02"], 5), nil)
        expectEqual(write("list", ["0"], 5), nil)
        expectEqual(write("meta", ["color"], 5), nil)
        expectEqual(write("meta", ["a", "b"], [1]), nil)
    }

    // MARK: - insert, replace, remove

    @Test func arrayChangesCheckNewElementsAndTheResultingCount() {
        let change = { (property: String, newElements: [JSONValue], resultingCount: Int) in
            failure { () throws(ValidationFailure) in
                try color.validateArrayChange(property: property, newElements: newElements,
                                              resultingCount: resultingCount, classOf: classOf)
            }
        }
        // insert and replace: elements against items.
        expectEqual(change("tags", ["a", "b"], 3), nil)
        expectEqual(change("tags", ["a", 3], 3), ValidationFailure(property: "tags", rule: "type", message: "an element of 'tags' must be a string (got 3)"))
        expectEqual(change("tags", ["123456789"], 2), ValidationFailure(property: "tags", rule: "maxLength", message: "an element of 'tags' must be at most 8 characters long (got 9)"))
        expectEqual(change("friends", [["$ref": "nobody"]], 1)?.rule, "class")
        // The resulting count, inclusive at both ends (insert grows it, remove shrinks it).
        expectEqual(change("tags", ["a"], 4), ValidationFailure(property: "tags", rule: "maxLength", message: "'tags' must have at most 3 elements (got 4)"))
        expectEqual(change("tags", [], 1), nil)
        expectEqual(change("tags", [], 0), ValidationFailure(property: "tags", rule: "minLength", message: "'tags' must have at least 1 element (got 0)"))
        // No items, no limits: anything goes.
        expectEqual(change("list", [1, "a", .null], 1000), nil)
        // Only arrays have array changes.
        expectEqual(change("meta", [1], 1), ValidationFailure(property: "meta", rule: "type", message: "'meta' is an object, not an array"))
    }
}
