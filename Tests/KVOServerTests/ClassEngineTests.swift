import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Classes through the engine: `create` with a class, validation of every kind of write (refused writes
/// change nothing and notify nobody), the reserved `$class` key, read-only computed properties, and
/// class definitions collected for the persistent store.
@Suite struct ClassEngineTests {
    let engine = KVOEngine(recordsCommitBatches: true)

    static let person = """
        {"name": "Person",
         "properties": {
           "name": {"type": "string", "required": true, "minLength": 1},
           "age": {"type": "integer", "min": 0, "max": 150, "default": 0},
           "tags": {"type": "array", "items": {"type": "string"}, "maxLength": 2},
           "friend": {"type": "ref", "class": "Person"},
           "meta": {"type": "object"}},
         "computed": {"label": "upper(name)"}}
        """

    init() throws {
        try engine.defineClass(json: ClassEngineTests.person)
        _ = engine.takeCommitBatch()
    }

    private func expectRefusal(_ code: KVOError.Code, property: String, rule: String? = nil,
                               _ attempt: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation, performing: attempt, throws: { error in
            guard let error = error as? KVOError else { return false }
            return error.code == code && error.details["property"] == .string(property)
                && (rule.map { error.details["rule"] == .string($0) } ?? true)
        })
    }

    @Test func createFillsDefaultsAndKeepsTheClassInTheObject() throws {
        try engine.create("ada", of: "Person", ["name": "Ada"])
        expectEqual(try engine.get("ada", keyPath: nil), ["$class": "Person", "name": "Ada", "age": 0])
        expectEqual(try engine.value("ada", "label"), "ADA", "computed properties read like stored ones")
    }

    @Test func aRefusedCreateChangesNothing() throws {
        expectRefusal(.invalidValue, property: "name", rule: "required") { try engine.create("x", of: "Person", ["age": 3]) }
        expectRefusal(.invalidValue, property: "shoe", rule: "undefined") {
            try engine.create("x", of: "Person", ["name": "X", "shoe": 42])
        }
        expectRefusal(.readOnly, property: "label") { try engine.create("x", of: "Person", ["name": "X", "label": "Y"]) }
        #expect(throws: KVOError(.notFound, "class 'Robot' is not defined")) { try engine.create("x", of: "Robot") }
        #expect(performing: { try engine.create("x", ["$class": "Person"]) },
                throws: { ($0 as? KVOError)?.code == .badRequest })
        expectEqual(engine.revision, 0)
        expectEqual(engine.objectCount, 0)
        #expect(!engine.hasUncommittedWrites)
    }

    @Test func aRefusedSetChangesNothingAndNotifiesNobody() throws {
        try engine.create("ada", of: "Person", ["name": "Ada", "age": 36])
        try engine.observe("ada", "age")
        let revision = engine.revision
        expectRefusal(.invalidValue, property: "age", rule: "max") { try engine.set("ada", "age", 151) }
        expectRefusal(.invalidValue, property: "age", rule: "type") { try engine.set("ada", "age", 36.5) }
        expectRefusal(.invalidValue, property: "name", rule: "required") { try engine.set("ada", "name", .null) }
        expectRefusal(.invalidValue, property: "nickname", rule: "undefined") { try engine.set("ada", "nickname", "A") }
        expectEqual(try engine.value("ada", "age"), 36)
        expectEqual(engine.revision, revision)
        expectEqual(try engine.set("ada", "age", 150).count, 1, "the boundary is accepted")
    }

    @Test func computedPropertiesAndTheClassKeyAreReadOnly() throws {
        try engine.create("ada", of: "Person", ["name": "Ada"])
        try engine.create("free", ["a": 1])
        expectRefusal(.readOnly, property: "label") { try engine.set("ada", "label", "X") }
        expectRefusal(.readOnly, property: "$class") { try engine.set("ada", "$class", "Robot") }
        expectRefusal(.readOnly, property: "$class") { try engine.set("free", "$class", "Person") }
        expectEqual(try engine.value("ada", "$class"), "Person")
    }

    @Test func writesThroughAReferenceAreValidatedByTheTargetsClass() throws {
        try engine.create("bob", of: "Person", ["name": "Bob"])
        try engine.create("ada", of: "Person", ["name": "Ada", "friend": .reference(to: "bob")])
        expectRefusal(.invalidValue, property: "age", rule: "min") { try engine.set("ada", "friend.age", -1) }
        try engine.set("ada", "friend.age", 40)
        expectEqual(try engine.value("bob", "age"), 40)
        expectEqual(try engine.value("ada", "friend.label"), "BOB", "computed properties across a reference")
    }

    @Test func referencesMustPointAtAnObjectOfTheNamedClass() throws {
        try engine.defineClass(json: #"{"name": "Dog", "properties": {"name": {"type": "string"}}}"#)
        try engine.create("rex", of: "Dog", ["name": "Rex"])
        try engine.create("plain", ["x": 1])
        try engine.create("ada", of: "Person", ["name": "Ada"])
        for target in ["rex", "plain", "ghost"] {
            expectRefusal(.invalidValue, property: "friend", rule: "class") {
                try engine.set("ada", "friend", .reference(to: target))
            }
        }
        expectRefusal(.invalidValue, property: "friend", rule: "type") { try engine.set("ada", "friend", "rex") }
    }

    @Test func arrayChangesAreValidatedAndARefusedOneLeavesTheArrayAsItWas() throws {
        try engine.create("ada", of: "Person", ["name": "Ada", "tags": ["a"]])
        try engine.observe("ada", "tags")
        let revision = engine.revision
        expectRefusal(.invalidValue, property: "tags", rule: "maxLength") {
            try engine.mutate("ada", "tags", .insert(indexes: nil, values: ["b", "c"]))
        }
        expectRefusal(.invalidValue, property: "tags", rule: "type") {
            try engine.mutate("ada", "tags", .insert(indexes: [0], values: [5]))
        }
        expectRefusal(.invalidValue, property: "tags", rule: "type") {
            try engine.mutate("ada", "tags", .replace(indexes: [0], values: [true]))
        }
        expectRefusal(.invalidValue, property: "tags", rule: "type") { try engine.set("ada", "tags.0", 7) }
        expectEqual(try engine.value("ada", "tags"), ["a"])
        expectEqual(engine.revision, revision)
        expectEqual(try engine.mutate("ada", "tags", .insert(indexes: [0], values: ["z"])).count, 1)
        expectEqual(try engine.value("ada", "tags"), ["z", "a"])
        #expect(throws: KVOError.self, "an index out of range is still out_of_range, not a class error") {
            try engine.mutate("ada", "tags", .remove(indexes: [5]))
        }
    }

    @Test func referencesInsertedIntoAnArrayAreCheckedAgainstTheirClass() throws {
        try engine.defineClass(json: """
            {"name": "Team", "properties": {"members": {"type": "array", "items": {"type": "ref", "class": "Person"}}}}
            """)
        try engine.create("ada", of: "Person", ["name": "Ada"])
        try engine.create("rex", ["kind": "dog"])
        try engine.create("t", of: "Team", ["members": []])
        try engine.mutate("t", "members", .insert(indexes: nil, values: [.reference(to: "ada")]))
        for id in ["rex", "ghost"] {
            expectRefusal(.invalidValue, property: "members", rule: "class") {
                try engine.mutate("t", "members", .insert(indexes: nil, values: [.reference(to: id)]))
            }
            expectRefusal(.invalidValue, property: "members", rule: "class") {
                try engine.mutate("t", "members", .replace(indexes: [0], values: [.reference(to: id)]))
            }
        }
        expectEqual(try engine.value("t", "members"), [["$ref": "ada"]])
    }

    @Test func definitionErrorsAreRefused() throws {
        #expect(throws: KVOError(.exists, "class 'Person' is already defined")) {
            try engine.defineClass(json: ClassEngineTests.person)
        }
        let syntax = #"{"name": "Bad", "properties": {"a": {"type": "number"}}, "computed": {"b": "a + * 2"}}"#
        #expect(performing: { try engine.defineClass(json: syntax) }, throws: { error in
            guard let error = error as? KVOError else { return false }
            return error.code == .invalidExpression && error.details["column"] == 5 && error.details["property"] == "b"
        })
        let loop = #"{"name": "Loop", "computed": {"a": "b + 1", "b": "c + 1", "c": "a + 1"}}"#
        #expect(throws: KVOError(.cycle, "class 'Loop': computed properties read each other in a cycle: a -> b -> c -> a")) {
            try engine.defineClass(json: loop)
        }
        expectEqual(engine.classDefinitions().count, 1, "refused definitions are not kept")
        #expect(!engine.hasUncommittedWrites)
    }

    @Test func definitionsAreListedAndCollectedForTheStoreWithoutARevision() throws {
        try engine.defineClass(json: #"{"name": "Animal"}"#)
        expectEqual(engine.classDefinitions().compactMap { $0["name"]?.stringValue }, ["Animal", "Person"])
        #expect(engine.hasUncommittedWrites)
        let batch = engine.takeCommitBatch()
        #expect(batch.revision == 0 && batch.entries.isEmpty)
        expectEqual(batch.classes.keys.sorted(), ["Animal"])
        expectEqual(batch.classes["Animal"], engine.classDefinitions()[0])
    }
}
