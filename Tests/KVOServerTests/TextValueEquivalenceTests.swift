import KVOJSON
import KVOModel
import Testing

@testable import KVOEngine
@testable import KVOServer

/// Issue 28's property: an engine whose `set`s hand it the value as canonical text (`set(_:keyPath:text:)`,
/// which keeps a top-level member as text: `LiveObject.texts`) behaves exactly as one given only decoded
/// values (the representation before it). Both run the same seeded random operations (creates, sets of
/// random values at one- and two-key paths, equal and numerically equal values, NFC and NFD strings,
/// array inserts, gets, deletes, observations with every option, at the written key, inside it and through
/// operators); after each one the replies, the notifications (values and the bytes an event carries),
/// history (entries, replay with `sinceRev`, bytes), the stored bytes, the digest, the objects and what a
/// commit batch would store must be identical.
@Suite struct TextValueEquivalenceTests {
    fileprivate static let keys = ["v", "w", "a"]
    private static let strings = ["x", "é", "e\u{301}", "Paris", String(repeating: "ab", count: 20), "", "ü😀"]

    private static func randomValue(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        switch Int(random.next() % (depth > 2 ? 6 : 9)) {
        case 0: return .null
        case 1: return .bool(random.next() % 2 == 0)
        case 2: return .int(Int64(random.next() % 5) - 1)
        case 3: return .double([1.0, 2.5, -0.0, 0.0][Int(random.next() % 4)])
        case 4, 5: return .string(strings[Int(random.next() % UInt64(depth == 0 ? 3 : strings.count))])
        case 6: return .array((0..<Int(random.next() % 3)).map { _ in randomValue(&random, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int(random.next() % 4) {
                members[["n", "m", "é", "k"][Int(random.next() % 4)]] = randomValue(&random, depth: depth + 1)
            }
            return .object(members)
        }
    }

    /// The value's text as a request would carry it for the text path: `JSONWriter`'s, when the parser
    /// would call it compact (no escapes, no non-integral number); nil otherwise.
    private static func canonicalText(of value: JSONValue) -> CanonicalText? {
        let bytes = JSONWriter.bytes(value)
        let request = Array("{\"value\":".utf8) + bytes + [UInt8(ascii: "}")]
        let range: Range<Int>? = request.withUnsafeBufferPointer { buffer in
            (try? JSONParser.parseMembers(buffer)).flatMap { $0?.first?.compactText }
        }
        guard let range, range.count == bytes.count else { return nil }
        return CanonicalText(trusting: bytes)
    }

    private struct Outcome: Equatable {
        var reply: String
        var events: [String]
    }

    private static func describe(_ notifications: [ChangeNotification]) -> [String] {
        notifications.map { n in
            var encoder = EventEncoder(n)
            let lines = [ObservationOptions.new, [.old], [.new, .old], [.new, .compactEvents]].map {
                String(decoding: encoder.line(subscription: 1, options: $0), as: UTF8.self)
            }
            let recipients = n.recipients.map { "\($0.subscription)" }.joined(separator: ",")
            return "\(n.object) \(n.keyPath) \(n.reason) \(n.rev) \(n.kind) \(n.isPrior) old=\(JSONWriter.string(n.old)) "
                + "new=\(JSONWriter.string(n.new)) \(n.indexes ?? []) [\(recipients)] " + lines.joined(separator: " | ")
        }
    }

    private static func state(of engine: KVOEngine) -> [String] {
        var lines = ["rev \(engine.revision) stored \(engine.storedBytes) history \(engine.historyCount)/\(engine.historyBytes)",
                     "digest \(StateDigest.of(engine))"]
        for id in engine.objectIDs() { lines.append("\(id) \(JSONWriter.string(try! engine.get(id, keyPath: nil)))") }
        var notifications: [ChangeNotification] = []
        if let sub = try? engine.observe("o1", keyPath: KeyPath("v"), options: [.new], connection: ConnectionID(99), sinceRev: 0,
                                         notifications: &notifications) {
            lines += describe(notifications)
            _ = engine.unobserve(sub, connection: ConnectionID(99))
        }
        let batch = engine.takeAcceptedChanges()
        for entry in batch.entries {
            var text: [UInt8] = []
            entry.writeChangeJSON(into: &text)
            var decoded: [UInt8] = []
            entry.change.writeJSON(into: &decoded)
            lines.append("entry \(entry.rev) \(entry.object) \(entry.changeSize) \(String(decoding: text, as: UTF8.self))")
            lines.append("decoded \(String(decoding: decoded, as: UTF8.self))")
        }
        for (id, stored) in batch.objects.sorted(by: { $0.key < $1.key }) { lines.append("batch \(id) \(stored)") }
        return lines
    }

    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func textAndDecodedValuesBehaveAlike(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let reference = KVOEngine(historyLimit: 50, recordsCommitBatches: true)
        let subject = KVOEngine(historyLimit: 50, recordsCommitBatches: true)
        if seed % 2 == 0 {
            for engine in [reference, subject] { engine.sizeLimits = StoredSizeLimits(maximumValueBytes: 60, maximumObjectBytes: 200,
                                                                                     maximumStoredBytes: 600) }
        }
        let paths = ["v", "w", "v", "w", "a", "v.n", "a.k", "v.@count", "0"]
        var textSets = 0
        var events = 0
        // Every object exists and is observed at "v" before the random steps (which may delete and re-create them).
        for engine in [reference, subject] {
            var notifications: [ChangeNotification] = []
            for index in 0..<3 {
                _ = try engine.create("o\(index)", values: ["v": "é"], notifications: &notifications)
                _ = try engine.observe("o\(index)", keyPath: KeyPath("v"), options: [.new, .old, .prior],
                                       connection: ConnectionID(2), notifications: &notifications)
            }
        }
        // Text against text: canonically equivalent strings (NFC and NFD) are equal values, as `==` says.
        let fixed: [JSONValue] = ["x", "é", "e\u{301}", "é", ["n": "é"], ["n": "e\u{301}"], 1, "x", ["n": "e\u{301}"]]
        for value in fixed {
            var expected: [ChangeNotification] = []
            var actual: [ChangeNotification] = []
            let expectedRev = try reference.set("o0", keyPath: KeyPath("v"), value: value, notifications: &expected)
            let actualRev = try subject.set("o0", keyPath: KeyPath("v"), text: Self.canonicalText(of: value)!, notifications: &actual)
            expectEqual(actualRev, expectedRev)
            expectEqual(Self.describe(actual), Self.describe(expected), "\(JSONWriter.string(value))")
        }
        for step in 0..<400 {
            let object = "o\(random.next() % 3)"
            let choice = random.next() % 24
            let value = Self.randomValue(&random)
            let path = paths[Int(random.next() % UInt64(paths.count))]
            func run(_ engine: KVOEngine, text: Bool) -> Outcome {
                var notifications: [ChangeNotification] = []
                let reply: String
                do throws(KVOError) {
                    switch choice {
                    case 0:
                        var members: [String: JSONValue] = [:]
                        for key in Self.keys where random.next() % 2 == 0 { members[key] = value }
                        reply = "rev \(try engine.create(object, values: members, notifications: &notifications))"
                    case 1:
                        reply = "rev \(try engine.delete(object, notifications: &notifications))"
                    case 2:
                        reply = JSONWriter.string(try engine.get(object, keyPath: try KeyPath(path)))
                    case 3, 4, 5:
                        let options: ObservationOptions = [[.new], [.old, .new], [.prior, .old], [.initial, .new]][step % 4]
                        reply = "sub \(try engine.observe(object, keyPath: try KeyPath(path), options: options, connection: ConnectionID(1), notifications: &notifications))"
                    case 6:
                        reply = "rev \(try engine.mutateArray(object, keyPath: try KeyPath(path), .insert(indexes: nil, values: [value]), notifications: &notifications))"
                    default:
                        let keyPath = try KeyPath(path)
                        if text, let canonical = Self.canonicalText(of: value) {
                            reply = "rev \(try engine.set(object, keyPath: keyPath, text: canonical, notifications: &notifications))"
                        } else {
                            reply = "rev \(try engine.set(object, keyPath: keyPath, value: value, notifications: &notifications))"
                        }
                    }
                } catch {
                    reply = "error \(error.code) \(error.message)"
                }
                return Outcome(reply: reply, events: Self.describe(notifications))
            }
            // The same random draws for both (the create's members use the generator: replay them).
            let saved = random
            let expected = run(reference, text: false)
            random = saved
            let actual = run(subject, text: true)
            if choice >= 7, Self.canonicalText(of: value) != nil { textSets += 1 }
            events += expected.events.count
            expectEqual(actual, expected, "seed \(seed) step \(step): \(choice) \(object) \(path) \(JSONWriter.string(value))")
            if step % 25 == 24 || actual != expected {
                expectEqual(Self.state(of: subject), Self.state(of: reference), "seed \(seed) step \(step)")
            }
            if actual != expected { return }
        }
        #expect(textSets > 50 && events > 50, "the text path was exercised: \(textSets) sets as text, \(events) events")
    }
}
