import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Parses a definition written as JSON text.
private func define(_ text: String) throws -> ClassDefinition {
    try ClassDefinition(json: JSONParser.parse(text))
}

/// The message of the error that refuses the definition, or nil when it is accepted.
private func refusal(_ text: String) throws -> String? {
    let json = try JSONParser.parse(text)
    do {
        _ = try ClassDefinition(json: json)
        return nil
    } catch {
        expectEqual(error.code, .badRequest)
        return error.message
    }
}

/// A class `C` with the one property `p` of the given spec.
private func withProperty(_ spec: String) -> String {
    #"{"name":"C","properties":{"p":\#(spec)}}"#
}

/// A class `C` with the one computed property `c` of the given entry.
private func withComputed(_ entry: String) -> String {
    #"{"name":"C","properties":{"p":{"type":"number"}},"computed":{"c":\#(entry)}}"#
}

/// Parsing and checking class definitions: every definition error, and the canonical JSON form.
@Suite struct ClassDefinitionTests {
    static let labColor = #"""
        {"name": "LabColor",
         "properties": {
           "L":    {"type": "number", "min": 0, "max": 100, "default": 50, "required": true},
           "name": {"type": "string", "minLength": 1, "maxLength": 40, "pattern": "^[a-z ]+$"},
           "mode": {"type": "string", "enum": ["lab", "lch"]},
           "count":{"type": "integer", "min": 0},
           "on":   {"type": "bool", "default": false},
           "tags": {"type": "array", "items": {"type": "string", "maxLength": 8}, "maxLength": 10},
           "meta": {"type": "object"},
           "owner":{"type": "ref", "class": "Person"}
         },
         "computed": {
           "red":   {"expression": "L * 2.55", "dependsOn": ["L"]},
           "label": "upper(name)"
         }}
        """#

    // MARK: - Accepted definitions

    @Test func theExampleDefinitionParsesWithEveryConstraint() throws {
        let definition = try define(Self.labColor)
        expectEqual(definition.name, "LabColor")
        expectEqual(definition.properties.keys.sorted(), ["L", "count", "meta", "mode", "name", "on", "owner", "tags"])
        let l = try #require(definition.properties["L"])
        #expect(l.type == .number && l.required && l.defaultValue == 50)
        #expect(l.constraints.minimum == 0 && l.constraints.maximum == 100)
        let name = try #require(definition.properties["name"])
        #expect(!name.required && name.defaultValue == nil)
        #expect(name.constraints.minLength == 1 && name.constraints.maxLength == 40)
        expectEqual(name.constraints.pattern?.source, "^[a-z ]+$")
        expectEqual(definition.properties["mode"]?.constraints.allowedValues, ["lab", "lch"])
        expectEqual(definition.properties["count"]?.type, .integer)
        expectEqual(definition.properties["on"]?.defaultValue, false)
        let tags = try #require(definition.properties["tags"])
        #expect(tags.items?.type == .string && tags.items?.constraints.maxLength == 8)
        expectEqual(definition.properties["meta"]?.type, .object)
        expectEqual(definition.properties["owner"]?.constraints.referencedClass, "Person")
        #expect(definition.computed["red"] == ComputedPropertySpec(name: "red", expression: "L * 2.55",
                                                                    dependsOn: [try KeyPath("L")]))
    }

    @Test func shorthandComputedIsAnExpressionWithoutDependencies() throws {
        let definition = try define(Self.labColor)
        expectEqual(definition.computed["label"], ComputedPropertySpec(name: "label", expression: "upper(name)", dependsOn: []))
        expectEqual(definition.json["computed"]?["label"], ["expression": "upper(name)", "dependsOn": []])
    }

    @Test func jsonRoundTripGivesAnEqualDefinition() throws {
        let definition = try define(Self.labColor)
        let again = try ClassDefinition(json: definition.json)
        expectEqual(again, definition)
        expectEqual(again.json, definition.json)
        // Anything lost on the way would make the two differ.
        #expect(try define(Self.labColor.replacingOccurrences(of: "\"max\": 100", with: "\"max\": 99")) != definition)
    }

    @Test func canonicalJSONIsExact() throws {
        let definition = try define(#"""
            {"name":"T","properties":{
              "n":{"type":"number","max":2.5,"min":-1,"required":false},
              "s":{"type":"string","enum":["a"],"default":"a","required":true},
              "r":{"type":"array","items":{"type":"ref","class":"T"},"minLength":0}},
             "computed":{"c":"n + 1","d":{"expression":"s","dependsOn":["s","r.@count"]}}}
            """#)
        // Keys sorted; `required` only when true; numbers keep int or double; computed always in object form.
        #expect(definition.json.description == #"{"computed":{"c":{"dependsOn":[],"expression":"n + 1"},"#
            + #""d":{"dependsOn":["s","r.@count"],"expression":"s"}},"name":"T","properties":{"#
            + #""n":{"max":2.5,"min":-1,"type":"number"},"r":{"items":{"class":"T","type":"ref"},"minLength":0,"type":"array"},"#
            + #""s":{"default":"a","enum":["a"],"required":true,"type":"string"}}}"#)
    }

    @Test func propertiesAndComputedMayBeAbsentOrEmpty() throws {
        for text in [#"{"name":"Empty"}"#, #"{"name":"Empty","properties":{},"computed":{}}"#] {
            let definition = try define(text)
            #expect(definition.properties.isEmpty && definition.computed.isEmpty)
            expectEqual(try ClassDefinition(json: definition.json), definition)
        }
    }

    @Test func boundariesThatAreAllowed() throws {
        _ = try define(withProperty(#"{"type":"number","min":3,"max":3}"#))
        _ = try define(withProperty(#"{"type":"integer","min":0.5,"max":1}"#))
        _ = try define(withProperty(#"{"type":"string","minLength":2,"maxLength":2.0}"#))
        _ = try define(withProperty(#"{"type":"string","pattern":"\#(String(repeating: "a", count: 512))"}"#))
        _ = try define(#"{"name":"\#(String(repeating: "A", count: 128))"}"#)
        _ = try define(#"{"name":"_a9","properties":{"\#(String(repeating: "é", count: 64))":{"type":"bool"},"a$@":{"type":"bool"}}}"#)
        _ = try define(withProperty(#"{"type":"number","default":null}"#))
        _ = try define(withProperty(#"{"type":"ref","class":"Other","default":{"$ref":"x"}}"#))
        _ = try define(withProperty(#"{"type":"integer","enum":[1,2.0]}"#))
    }

    @Test func atMost256PropertiesAndComputedTogether() throws {
        func definition(properties: Int, computed: Int) -> String {
            let p = (0..<properties).map { #""p\#($0)":{"type":"bool"}"# }.joined(separator: ",")
            let c = (0..<computed).map { #""c\#($0)":"1""# }.joined(separator: ",")
            return #"{"name":"Big","properties":{\#(p)},"computed":{\#(c)}}"#
        }
        expectEqual(try define(definition(properties: 200, computed: 56)).properties.count, 200)
        #expect(try refusal(definition(properties: 200, computed: 57))
            == "class 'Big': 257 properties and computed properties; at most 256")
        #expect(try refusal(definition(properties: 257, computed: 0)) != nil)
    }

    // MARK: - Refused definitions

    @Test(arguments: [
        // Each constraint on a type it does not suit.
        (#"{"type":"string","min":1}"#, "'min' is not allowed for type string"),
        (#"{"type":"bool","max":1}"#, "'max' is not allowed for type bool"),
        (#"{"type":"number","minLength":1}"#, "'minLength' is not allowed for type number"),
        (#"{"type":"object","maxLength":1}"#, "'maxLength' is not allowed for type object"),
        (#"{"type":"array","pattern":"a"}"#, "'pattern' is not allowed for type array"),
        (#"{"type":"string","items":{"type":"string"}}"#, "'items' is not allowed for type string"),
        (#"{"type":"string","class":"Person"}"#, "'class' is not allowed for type string"),
        (#"{"type":"integer","pattern":"1"}"#, "'pattern' is not allowed for type integer"),
        // Malformed constraints.
        (#"{"type":"ref"}"#, "'class' is required for type ref"),
        (#"{"type":"ref","class":"no such"}"#,
         "'class' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"type":"ref","class":3}"#, "'class' must be a string"),
        (#"{"type":"number","min":"0"}"#, "'min' must be a number"),
        (#"{"type":"integer","max":null}"#, "'max' must be a number"),
        (#"{"type":"number","min":5,"max":1}"#, "'min' (5) must not be greater than 'max' (1)"),
        (#"{"type":"number","min":1.5,"max":1}"#, "'min' (1.5) must not be greater than 'max' (1)"),
        (#"{"type":"string","minLength":-1}"#, "'minLength' must be a non-negative integer"),
        (#"{"type":"string","maxLength":1.5}"#, "'maxLength' must be a non-negative integer"),
        (#"{"type":"array","maxLength":"3"}"#, "'maxLength' must be a non-negative integer"),
        (#"{"type":"array","minLength":3,"maxLength":2}"#, "'minLength' (3) must not be greater than 'maxLength' (2)"),
        (#"{"type":"string","pattern":1}"#, "'pattern' must be a string"),
        (#"{"type":"string","pattern":"\#(String(repeating: "a", count: 513))"}"#, "'pattern' is longer than 512 bytes"),
        (#"{"type":"string","enum":[]}"#, "'enum' must be a non-empty array"),
        (#"{"type":"string","enum":"a"}"#, "'enum' must be a non-empty array"),
        (#"{"type":"string","enum":["a",1]}"#, "'enum' value 1 is not a string"),
        (#"{"type":"integer","enum":[1,2.5]}"#, "'enum' value 2.5 is not an integer"),
        (#"{"type":"object","enum":[{"$ref":"x"}]}"#, #"'enum' value {"$ref":"x"} is not an object"#),
        (#"{"type":"string","enum":[null]}"#, "'enum' value null is not a string"),
        (#"{"type":"number","required":"yes"}"#, "'required' must be true or false"),
        // Type.
        (#"{"min":1}"#, "'type' is missing"),
        (#"{"type":1}"#, "'type' must be a string"),
        (#"{"type":"float"}"#, "unknown type 'float' (known: string, number, integer, bool, array, object, ref)"),
        (#""string""#, "the spec must be an object (got a string)"),
        (#"{"type":"string","minimum":1}"#,
         "unknown member 'minimum' (known: type, required, default, min, max, minLength, maxLength, pattern, enum, items, class)"),
        // Items.
        (#"{"type":"array","items":"string"}"#, "items: the spec must be an object (got a string)"),
        (#"{"type":"array","items":{"type":"string","required":true}}"#, "items: 'required' is not allowed in items"),
        (#"{"type":"array","items":{"type":"string","default":"a"}}"#, "items: 'default' is not allowed in items"),
        (#"{"type":"array","items":{"type":"array","items":{"type":"string"}}}"#, "items: 'items' is not allowed in items"),
        (#"{"type":"array","items":{"type":"number","min":2,"max":1}}"#, "items: 'min' (2) must not be greater than 'max' (1)"),
        (#"{"type":"array","items":{"type":"ref"}}"#, "items: 'class' is required for type ref"),
        // Defaults that break the rules.
        (#"{"type":"number","max":10,"default":11}"#, "'default' breaks the property's rules: 'p' must be at most 10 (got 11)"),
        (#"{"type":"integer","default":1.5}"#, "'default' breaks the property's rules: 'p' must be an integer (got 1.5)"),
        (#"{"type":"string","pattern":"^a","default":"ba"}"#,
         "'default' breaks the property's rules: 'p' must match the pattern ^a (got \"ba\")"),
        (#"{"type":"string","enum":["a"],"default":"b"}"#, #"'default' breaks the property's rules: 'p' must be one of "a""#),
        (#"{"type":"bool","required":true,"default":null}"#, "'default' breaks the property's rules: 'p' is required"),
        (#"{"type":"array","items":{"type":"string"},"default":["a",1]}"#,
         "'default' breaks the property's rules: 'p.1' must be a string (got 1)"),
        (#"{"type":"ref","class":"P","default":"x"}"#,
         #"'default' breaks the property's rules: 'p' must be a reference {"$ref": "<id>"} (got a string)"#),
    ] as [(String, String)])
    func propertySpecErrorsNameClassPropertyAndProblem(spec: String, problem: String) throws {
        expectEqual(try refusal(withProperty(spec)), "class 'C': property 'p': \(problem)")
    }

    @Test func aPatternThatDoesNotCompileIsRefused() throws {
        let message = try #require(try refusal(withProperty(#"{"type":"string","pattern":"(a"}"#)))
        #expect(message.hasPrefix("class 'C': property 'p': 'pattern' does not compile: "))
        #expect(try refusal(withProperty(#"{"type":"string","pattern":"(?<=a+)b"}"#)) != nil)
    }

    @Test(arguments: [
        (#"[]"#, "class must be an object"),
        (#"{"properties":{}}"#, "class: 'name' is missing"),
        (#"{"name":1}"#, "class: 'name' must be a string"),
        (#"{"name":""}"#, "class name '' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"name":"1abc"}"#, "class name '1abc' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"name":"a-b"}"#, "class name 'a-b' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"name":"Café"}"#, "class name 'Café' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"name":"\#(String(repeating: "A", count: 129))"}"#,
         "class name '\(String(repeating: "A", count: 129))' must be 1 to 128 bytes of letters, digits and '_', not starting with a digit"),
        (#"{"name":"C","extends":"B"}"#, "class 'C': unknown member 'extends' (known: name, properties, computed)"),
        (#"{"name":"C","properties":[]}"#, "class 'C': 'properties' must be an object"),
        (#"{"name":"C","computed":"x"}"#, "class 'C': 'computed' must be an object"),
        // Property and computed names.
        (#"{"name":"C","properties":{"":{"type":"bool"}}}"#, "class 'C': property '': the name must not be empty"),
        (#"{"name":"C","properties":{"a.b":{"type":"bool"}}}"#, "class 'C': property 'a.b': the name must not contain '.'"),
        (#"{"name":"C","properties":{"@count":{"type":"bool"}}}"#, "class 'C': property '@count': the name must not start with '@' or '$'"),
        (#"{"name":"C","properties":{"$ref":{"type":"bool"}}}"#, "class 'C': property '$ref': the name must not start with '@' or '$'"),
        (#"{"name":"C","properties":{"123":{"type":"bool"}}}"#, "class 'C': property '123': the name must not be all digits"),
        (#"{"name":"C","properties":{"\#(String(repeating: "é", count: 65))":{"type":"bool"}}}"#,
         "class 'C': property '\(String(repeating: "é", count: 65))': the name is longer than 128 bytes"),
        (#"{"name":"C","computed":{"a.b":"1"}}"#, "class 'C': computed property 'a.b': the name must not contain '.'"),
        (#"{"name":"C","computed":{"7":"1"}}"#, "class 'C': computed property '7': the name must not be all digits"),
        (#"{"name":"C","properties":{"x":{"type":"bool"}},"computed":{"x":"1"}}"#,
         "class 'C': computed property 'x': the name is also a stored property"),
    ] as [(String, String)])
    func classLevelErrors(definition: String, message: String) throws {
        expectEqual(try refusal(definition), message)
    }

    @Test(arguments: [
        ("3", "must be an expression string or an object (got 3)"),
        (#"{"dependsOn":["p"]}"#, "'expression' is missing"),
        (#"{"expression":""}"#, "'expression' must be a non-empty string"),
        (#"{"expression":2}"#, "'expression' must be a non-empty string"),
        (#"{"expression":"p","depends":["p"]}"#, "unknown member 'depends' (known: expression, dependsOn)"),
        (#"{"expression":"p","dependsOn":"p"}"#, "'dependsOn' must be an array of key paths"),
        (#"{"expression":"p","dependsOn":[1]}"#, "'dependsOn' must be an array of key paths (got 1)"),
        (#"{"expression":"p","dependsOn":["p..q"]}"#, "'dependsOn': keyPath 'p..q' has an empty key"),
        (#"{"expression":"p","dependsOn":["p.@nope"]}"#,
         "'dependsOn': unknown collection operator '@nope' (known: @count, @sum, @avg, @min, @max, @unionOfObjects, @distinctUnionOfObjects, @unionOfArrays, @distinctUnionOfArrays)"),
        (#"{"expression":"p","dependsOn":[""]}"#, "'dependsOn': keyPath must not be empty"),
    ] as [(String, String)])
    func computedErrors(entry: String, problem: String) throws {
        expectEqual(try refusal(withComputed(entry)), "class 'C': computed property 'c': \(problem)")
    }

    @Test func dependsOnKeepsTheKeyPaths() throws {
        let definition = try define(withComputed(#"{"expression":"p","dependsOn":["p","owner.name","tags.@count"]}"#))
        expectEqual(definition.computed["c"]?.dependsOn.map(\.string), ["p", "owner.name", "tags.@count"])
        expectEqual(definition.computed["c"]?.dependsOn.last?.collectionOperator, .count)
    }
}
