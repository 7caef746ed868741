import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// KVOClient's typed requests and errors against the real kvod over TCP: every operation's encoding and
/// decoding, revisions from writes, many tasks pipelining on one connection, and each error code with its
/// details.
@Suite struct KVOClientRequestTests {
    struct Person: Codable, Equatable, Sendable {
        var name: String
        var age: Int
        var tags: [String]
    }

    @Test("typed create, get, set, insert, remove, replace, delete; each write returns the new rev")
    func typedObjectOperations() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let hello = try await kvod.hello()
        #expect(hello.server == "kvod" && hello.protocolVersion == 1)
        try await kvod.ping()
        expectEqual(try await kvod.create("ada", values: Person(name: "Ada", age: 36, tags: ["math"])), 1)
        #expect(try await kvod.get("ada", as: Person.self) == (Person(name: "Ada", age: 36, tags: ["math"]), 1))
        expectEqual(try await kvod.set("age", of: "ada", to: 37), 2)
        expectEqual(try await kvod.get("age", of: "ada", as: Int.self).value, 37)
        expectEqual(try await kvod.insert("tags", of: "ada", values: ["poetry", "engines"]), 3)
        expectEqual(try await kvod.remove("tags", of: "ada", indexes: [0]), 4)
        expectEqual(try await kvod.replace("tags", of: "ada", indexes: [1], with: ["looms"]), 5)
        expectEqual(try await kvod.insert("tags", of: "ada", values: ["first"], at: 0), 6)
        expectEqual(try await kvod.get("tags", of: "ada", as: [String].self).value, ["first", "poetry", "looms"])
        expectEqual(try await kvod.get("name", of: "ada"), "Ada")
        expectEqual(try await kvod.create("b"), 7)
        expectEqual(try await kvod.list(), .init(objects: ["ada", "b"], more: false))
        expectEqual(try await kvod.list(limit: 1), .init(objects: ["ada"], more: true))
        expectEqual(try await kvod.delete("b"), 8)
        expectEqual(try await kvod.listAll(pageSize: 1), ["ada"])
        kvod.close()
    }

    struct Order: Codable, Equatable, Sendable {
        enum Status: String, Codable, Sendable { case open, shipped }
        struct Line: Codable, Equatable, Sendable {
            var sku: String
            var quantity: UInt8
            var price: Double
        }
        var id: Int64
        var status: Status
        var lines: [Line]
        var note: String?
        var tags: Set<String>
        var extra: JSONValue
        var ratio: Float
    }

    @Test("Codable values round-trip through kvod with the library's own encoder and decoder (nesting, optionals, enums, numbers)")
    func codableRoundTrip() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let order = Order(id: 9_007_199_254_740_993, status: .shipped,
                          lines: [.init(sku: "a", quantity: 3, price: 2.5), .init(sku: "b", quantity: 255, price: 4)],
                          note: nil, tags: ["x"], extra: ["k": [1, "two", .null]], ratio: 0.5)
        try await kvod.create("order", values: order)
        expectEqual(try await kvod.get("order", as: Order.self).value, order)
        // The JSON is what the types say: an integer stays exact, a whole double reads back as a number.
        let stored = try await kvod.get("order")
        #expect(stored["id"] == .int(9_007_199_254_740_993) && stored["status"] == "shipped" && stored["note"] == nil)
        expectEqual(stored["lines"]?.arrayValue?.first?["quantity"], 3)
        // A value that does not fit the type asked for is a coding error, not a crash.
        let wrong = await kvodError { _ = try await kvod.get("lines", of: "order", as: [UInt8].self) }
        guard case .coding? = wrong else {
            Issue.record("expected a coding error, got \(String(describing: wrong))")
            return
        }
        let overflow = await kvodError { _ = try await kvod.get("id", of: "order", as: Int8.self) }
        guard case .coding? = overflow else {
            Issue.record("expected a coding error, got \(String(describing: overflow))")
            return
        }
    }

    @Test("classes, bindings and info through typed calls")
    func classesBindingsAndInfo() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let definition: JSONValue = ["name": "Tag", "properties": ["label": ["type": "string", "maxLength": 5]]]
        expectEqual(try await kvod.defineClass(definition), "Tag")
        expectEqual(try await kvod.classes().count, 1)
        try await kvod.create("a", values: ["x": 1] as JSONValue)
        try await kvod.create("b", values: JSONValue.object([:]))
        let binding = try await kvod.bind(from: .init("x", of: "a"), to: .init("y", of: "b"), convert: "$value * 2", now: true)
        expectEqual(try await kvod.get("y", of: "b"), 2)
        let combined = try await kvod.combineLatest([.init("x", of: "a"), .init("y", of: "b")], to: .init("sum", of: "b"), reduce: "$0 + $1", now: true)
        expectEqual(try await kvod.get("sum", of: "b"), 3)
        expectEqual(try await kvod.bindings().count, 2)
        #expect(try await kvod.unbind(binding.binding))
        #expect(try await kvod.unbind(combined.binding))
        #expect(try await !kvod.unbind(combined.binding))
        let observation = try await kvod.subscribe("x", of: "a", options: [.new, .old])
        let observers = try await kvod.info("a")
        #expect(observers.count == 1 && observers.first?.keyPath == "x" && observers.first?.options == ["new", "old"])
        _ = observation
    }

    @Test("a thousand tasks pipeline sets on one connection; every reply reaches its own task with its own rev")
    func manyTasksShareOneConnection() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        try await kvod.create("counter", values: JSONValue.object([:]))
        let revisions = try await withThrowingTaskGroup(of: (Int, Int64).self) { group in
            for task in 0..<1000 {
                group.addTask { (task, try await kvod.set("k\(task)", of: "counter", to: task)) }
            }
            var revisions: [Int: Int64] = [:]
            for try await (task, rev) in group { revisions[task] = rev }
            return revisions
        }
        expectEqual(Set(revisions.values), Set(2...1001))
        // Each task's reply was its own: the value stored under its key was written at its revision.
        let stored = try await kvod.get("counter")
        for task in [0, 1, 499, 999] { #expect(stored["k\(task)"] == .int(Int64(task))) }
        // One connection for all of them.
        let probe = try server.connectProbe()
        let hello = try probe.call("hello")
        expectEqual(hello["connection"]?.intValue, (try await kvod.hello()).connection + 1)
    }

    @Test("server errors carry the protocol's code, message and details")
    func errorsCarryCodesAndDetails() async throws {
        let server = try KVODProcess(["--max-value-bytes", "64", "--max-observations-per-connection", "1", "--max-memory", "4000"])
        let kvod = try await server.client()
        func expectCode(_ code: KVODError.Code, _ sourceLocation: SourceLocation = #_sourceLocation,
                        _ body: () async throws -> Void) async -> KVODError.Details? {
            let error = await kvodError(sourceLocation, body)
            guard case let .server(actual, message, details)? = error else {
                Issue.record("expected \(code), got \(String(describing: error))", sourceLocation: sourceLocation)
                return nil
            }
            #expect(actual == code, sourceLocation: sourceLocation)
            #expect(!message.isEmpty, sourceLocation: sourceLocation)
            return details
        }
        await _ = expectCode(.notFound) { _ = try await kvod.get("missing") }
        try await kvod.create("o", values: ["n": 1, "list": [1, 2]] as JSONValue)
        await _ = expectCode(.exists) { try await kvod.create("o") }
        await _ = expectCode(.typeMismatch) { try await kvod.set("n.x", of: "o", to: 1) }
        await _ = expectCode(.outOfRange) { try await kvod.remove("list", of: "o", indexes: [5]) }
        await _ = expectCode(.badRequest) { _ = try await kvod.request("set", ["object": "o"]) }
        await _ = expectCode(.unknownOp) { _ = try await kvod.request("frobnicate") }
        let tooLarge = await expectCode(.tooLarge) { try await kvod.set("n", of: "o", to: String(repeating: "x", count: 100)) }
        expectEqual(tooLarge?.limit, 64)
        try await kvod.defineClass(["name": "Tag", "properties": ["label": ["type": "string", "maxLength": 3]],
                                    "computed": ["size": "label"]] as JSONValue)
        try await kvod.create("t", values: ["label": "abc"] as JSONValue, class: "Tag")
        let invalid = await expectCode(.invalidValue) { try await kvod.set("label", of: "t", to: "abcdef") }
        #expect(invalid?.property == "label" && invalid?.rule == "maxLength")
        let readOnly = await expectCode(.readOnly) { try await kvod.set("size", of: "t", to: "x") }
        expectEqual(readOnly?.property, "size")
        let expression = await expectCode(.invalidExpression) {
            _ = try await kvod.bind(from: .init("n", of: "o"), to: .init("label", of: "t"), convert: "$value +")
        }
        #expect(expression?.column != nil)
        try await kvod.create("p", values: JSONValue.object([:]))
        _ = try await kvod.bind(from: .init("n", of: "o"), to: .init("m", of: "p"))
        await _ = expectCode(.cycle) { _ = try await kvod.bind(from: .init("m", of: "p"), to: .init("n", of: "o")) }
        let first = try await kvod.subscribe("n", of: "o")
        let tooMany = await expectCode(.tooManyObservations) { _ = try await kvod.subscribe("list", of: "o") }
        expectEqual(tooMany?.limit, 1)
        _ = first
        let quota = await expectCode(.quotaExceeded) {
            for index in 0..<200 { try await kvod.create("filler-\(index)", values: ["v": .string(String(repeating: "q", count: 40))] as JSONValue) }
        }
        #expect(quota?.limit == 4000 && (quota?.used ?? 0) > 0)
        // The connection keeps serving after every refusal.
        try await kvod.ping()
        expectEqual(KVODError.Code(wireName: "brand_new"), .other("brand_new"))
        expectEqual(KVODError.Code.quotaExceeded.wireName, "quota_exceeded")
    }
}
