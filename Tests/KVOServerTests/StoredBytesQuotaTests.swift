import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// `--max-memory` in the engine (issue 11, quotas): `storedBytes` counts every object's id and compact
/// JSON and every class and binding definition, kept up to date from what each write changed, and a
/// quota refuses exactly the writes that would grow the total past it (`quota_exceeded`, nothing
/// changes), whatever the write path.
@Suite("stored bytes quota")
struct StoredBytesQuotaTests {
    /// What `storedBytes` should be, counted again from scratch.
    private static func recount(_ engine: KVOEngine) throws -> Int {
        var total = 0
        for id in engine.objectIDs() {
            total += id.utf8.count + JSONWriter.bytes(try engine.get(id, keyPath: nil)).count
        }
        for definition in engine.classDefinitions() { total += JSONWriter.bytes(definition).count }
        for binding in engine.bindingTable.all { total += JSONWriter.bytes(binding.spec.json).count }
        return total
    }

    /// Every object by id.
    private static func snapshot(_ engine: KVOEngine) throws -> JSONValue {
        var members: [String: JSONValue] = [:]
        for id in engine.objectIDs() { members[id] = try engine.get(id, keyPath: nil) }
        return .object(members)
    }

    private static func text(_ count: Int) -> JSONValue { .string(String(repeating: "x", count: count)) }

    @Test("storedBytes equals a recount after creates, writes, deletes, classes and bindings", arguments: [UInt64(3), 4])
    func storedBytesMatchesARecount(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.defineClass(try JSONParser.parse(Array(#"{"name":"P","properties":{"n":{"type":"integer"}}}"#.utf8)))
        expectEqual(engine.storedBytes, (try Self.recount(engine)))
        var bindings: [UInt64] = []
        for step in 0..<300 {
            let id = ["a", "bb", "ccé"].randomElement(using: &random)!
            let exists = (try? engine.get(id, keyPath: nil)) != nil
            switch Int.random(in: 0..<7, using: &random) {
            case 0 where !exists:
                _ = try engine.create(id, values: ["list": [], "v": Self.text(Int.random(in: 0...20, using: &random))],
                                      notifications: &notifications)
            case 1 where exists:
                _ = try engine.delete(id, notifications: &notifications)
            case 2 where exists:
                _ = try engine.set(id, keyPath: try KeyPath(["v", "w"].randomElement(using: &random)!),
                                   value: Self.text(Int.random(in: 0...30, using: &random)), notifications: &notifications)
            case 3 where exists:
                _ = try engine.mutateArray(id, keyPath: try KeyPath("list"), .insert(indexes: nil, values: [1, "two"]),
                                           notifications: &notifications)
            case 4 where exists:
                let count = (try engine.get(id, keyPath: try KeyPath("list"))).arrayValue?.count ?? 0
                if count > 0 {
                    _ = try engine.mutateArray(id, keyPath: try KeyPath("list"), .remove(indexes: [count - 1]),
                                               notifications: &notifications)
                }
            case 5 where exists && id != "a" && (try? engine.get("a", keyPath: nil)) != nil:
                let spec = BindingSpec(kind: .bind, sources: [BindingEndpoint(object: "a", keyPath: try KeyPath("v"))],
                                       target: BindingEndpoint(object: id, keyPath: try KeyPath("copy")),
                                       filter: nil, transform: "$value + '!'")
                if let binding = try? engine.bind(spec, now: true, creator: nil, notifications: &notifications) {
                    bindings.append(binding)
                }
            case 6 where !bindings.isEmpty:
                _ = engine.unbind(bindings.removeLast())
            default:
                break
            }
            expectEqual(engine.storedBytes, (try Self.recount(engine)), "step \(step)")
        }
    }

    @Test("past the quota every growing write is refused and changes nothing; shrinking and deleting work")
    func quotaRefusesGrowingWrites() throws {
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.create("r", values: ["to": ["$ref": "o"]], notifications: &notifications)
        _ = try engine.create("o", values: ["list": ["ab"], "v": Self.text(10)], notifications: &notifications)
        _ = try engine.create("s", values: ["v": 1], notifications: &notifications)
        let spec = BindingSpec(kind: .bind, sources: [BindingEndpoint(object: "s", keyPath: try KeyPath("v"))],
                               target: BindingEndpoint(object: "o", keyPath: try KeyPath("copy")),
                               filter: nil, transform: nil)
        _ = try? engine.bind(spec, now: false, creator: ConnectionID(1, slot: 0), notifications: &notifications)
        engine.sizeLimits.maximumStoredBytes = engine.storedBytes + 5
        // Fill the last 5 bytes exactly: `v` grows from 10 to 15 characters.
        _ = try engine.set("o", keyPath: try KeyPath("v"), value: Self.text(15), notifications: &notifications)
        expectEqual(engine.storedBytes, engine.sizeLimits.maximumStoredBytes)
        let full = try Self.recount(engine)
        let revision = engine.revision
        let objects = try Self.snapshot(engine)

        func refused(_ what: String, _ write: () throws(KVOError) -> Void) {
            notifications.removeAll()
            do {
                try write()
                Issue.record("\(what) was accepted")
            } catch {
                expectEqual(error.code, .quotaExceeded, "\(what): \(error)")
                expectEqual(error.details["limit"], .int(Int64(engine.sizeLimits.maximumStoredBytes)), "\(what)")
                expectEqual(error.details["used"], .int(Int64(full)), "\(what)")
            }
            expectEqual(engine.revision, revision, "\(what) moved the revision")
            expectEqual(engine.storedBytes, full, "\(what)")
            #expect(notifications.isEmpty, "\(what) notified")
            expectEqual((try? Self.snapshot(engine)), objects, "\(what) changed the store")
        }
        let key = try KeyPath("v")
        refused("create") { () throws(KVOError) in _ = try engine.create("p", values: [:], notifications: &notifications) }
        refused("set") { () throws(KVOError) in _ = try engine.set("o", keyPath: key, value: Self.text(16), notifications: &notifications) }
        refused("set of a new key") { () throws(KVOError) in _ = try engine.set("o", keyPath: try KeyPath("n"), value: 1, notifications: &notifications) }
        refused("set through a reference") { () throws(KVOError) in
            _ = try engine.set("r", keyPath: try KeyPath("to.v"), value: Self.text(16), notifications: &notifications)
        }
        refused("element set") { () throws(KVOError) in
            _ = try engine.set("o", keyPath: try KeyPath("list.0"), value: "abc", notifications: &notifications)
        }
        refused("insert") { () throws(KVOError) in
            _ = try engine.mutateArray("o", keyPath: try KeyPath("list"), .insert(indexes: nil, values: [1]), notifications: &notifications)
        }
        refused("replace") { () throws(KVOError) in
            _ = try engine.mutateArray("o", keyPath: try KeyPath("list"), .replace(indexes: [0], values: ["abc"]),
                                       notifications: &notifications)
        }
        let lateClass = try JSONParser.parse(Array(#"{"name":"Q"}"#.utf8))
        refused("defineClass") { () throws(KVOError) in _ = try engine.defineClass(lateClass) }
        refused("bind") { () throws(KVOError) in
            let spec = BindingSpec(kind: .bind, sources: [BindingEndpoint(object: "s", keyPath: try KeyPath("w"))],
                                   target: BindingEndpoint(object: "o", keyPath: try KeyPath("w")), filter: nil, transform: nil)
            _ = try engine.bind(spec, now: false, creator: nil, notifications: &notifications)
        }
        _ = engine.takeBindingEvents()
        // A binding's write that would grow the store is skipped and reported; the source write stays.
        _ = try engine.set("s", keyPath: try KeyPath("v"), value: 2, notifications: &notifications)
        expectEqual(try engine.get("s", keyPath: try KeyPath("v")), 2)
        expectEqual(try engine.get("o", keyPath: try KeyPath("copy")), .null)
        let events = engine.takeBindingEvents()
        expectEqual(events.count, 1)
        if case let .refused(error)? = events.first?.reason { #expect(error.code == .quotaExceeded) } else {
            Issue.record("no refusal reported: \(events)")
        }
        // Writes that keep the size, shrink it or delete go through; then growing works again.
        _ = try engine.set("o", keyPath: key, value: .string(String(repeating: "y", count: 15)), notifications: &notifications)
        _ = try engine.mutateArray("o", keyPath: try KeyPath("list"), .remove(indexes: [0]), notifications: &notifications)
        _ = try engine.delete("r", notifications: &notifications)
        _ = try engine.set("o", keyPath: try KeyPath("n"), value: 1, notifications: &notifications)
        expectEqual(engine.storedBytes, (try Self.recount(engine)))
        #expect(engine.storedBytes <= engine.sizeLimits.maximumStoredBytes)
    }
}
