import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// The engine keeps each object's compact-JSON size from the sizes of what each write changed (issue
/// 10 item 6): after any sequence of writes it equals the size of the object encoded again, and the
/// size limits refuse exactly the writes that would pass them.
@Suite("object size tracking")
struct ObjectSizeTrackingTests {
    private static func randomValue(_ random: inout SplitMix64, depth: Int = 0) -> JSONValue {
        switch Int.random(in: 0..<(depth > 2 ? 6 : 8), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &random) >> Int64.random(in: 0...63, using: &random))
        case 3: return .double(Double.random(in: -1e6...1e6, using: &random))
        case 4: return .string(["", "a", "é\"\\\n\u{01}\t", "long text with spaces", "\u{7F}ü😀"].randomElement(using: &random)!)
        case 5: return .int(Int64.random(in: -10...10, using: &random))
        case 6: return .array((0..<Int.random(in: 0...3, using: &random)).map { _ in randomValue(&random, depth: depth + 1) })
        default:
            var members: [String: JSONValue] = [:]
            for _ in 0..<Int.random(in: 0...3, using: &random) {
                members[["a", "b", "k\"", "ü", "\n"].randomElement(using: &random)!] = randomValue(&random, depth: depth + 1)
            }
            return .object(members)
        }
    }

    /// Every escape at every offset of a string, around the eight-byte runs the count skips.
    @Test func encodedLengthOfStringsCountsEveryEscapeAtEveryOffset() {
        let specials: [String] = ["\"", "\\", "\n", "\r", "\t", "\u{8}", "\u{C}", "\u{0}", "\u{1F}", "\u{7F}", "é", "😀"]
        for length in 0..<20 {
            for offset in 0...length {
                for special in specials {
                    var text = String(repeating: "a", count: length)
                    text.insert(contentsOf: special, at: text.index(text.startIndex, offsetBy: offset))
                    var written: [UInt8] = []
                    JSONWriter.writeString(text, into: &written)
                    expectEqual(JSONWriter.encodedLength(ofString: text), written.count, "\(text.debugDescription)")
                }
            }
        }
    }

    @Test("encodedLength is the length of the encoding", arguments: [UInt64(1), 2, 3])
    func encodedLengthMatchesTheWriter(seed: UInt64) {
        var random = SplitMix64(state: seed)
        for _ in 0..<500 {
            let value = Self.randomValue(&random)
            expectEqual(JSONWriter.encodedLength(of: value), JSONWriter.bytes(value).count, "\(value)")
        }
        expectEqual(JSONWriter.encodedLength(of: .int(Int64.min)), String(Int64.min).count)
    }

    @Test("the tracked size equals the re-encoded size after random writes", arguments: [UInt64(7), 8, 9])
    func trackedSizeMatchesAfterRandomWrites(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.create("o", values: ["list": [], "map": [:]], notifications: &notifications)
        for step in 0..<400 {
            let value = Self.randomValue(&random)
            let count = (try engine.get("o", keyPath: KeyPath("list"))).arrayValue?.count ?? 0
            switch Int.random(in: 0..<6, using: &random) {
            case 0: _ = try engine.set("o", keyPath: KeyPath(["a", "b", "c"].randomElement(using: &random)!), value: value,
                                       notifications: &notifications)
            case 1: _ = try engine.set("o", keyPath: KeyPath("map.\(["x", "y", "z\"q"].randomElement(using: &random)!)"),
                                       value: value, notifications: &notifications)
            case 2: _ = try engine.mutateArray("o", keyPath: KeyPath("list"),
                                               .insert(indexes: nil, values: [value, Self.randomValue(&random)]),
                                               notifications: &notifications)
            case 3 where count > 0:
                _ = try engine.mutateArray("o", keyPath: KeyPath("list"), .remove(indexes: [Int.random(in: 0..<count, using: &random)]),
                                           notifications: &notifications)
            case 4 where count > 1:
                _ = try engine.mutateArray("o", keyPath: KeyPath("list"), .remove(indexes: Array(0..<count)),
                                           notifications: &notifications)
            case 5 where count > 0:
                _ = try engine.set("o", keyPath: KeyPath("list.\(Int.random(in: 0..<count, using: &random))"), value: value,
                                   notifications: &notifications)
            default: break
            }
            let object = try engine.get("o", keyPath: nil)
            expectEqual(engine.objects.size(of: "o"), JSONWriter.bytes(object).count, "step \(step)")
        }
    }

    @Test("writes past the value or object limit are refused and change nothing")
    func limitsRefuseAndChangeNothing() throws {
        let engine = KVOEngine()
        engine.sizeLimits = StoredSizeLimits(maximumValueBytes: 20, maximumObjectBytes: 60)
        var notifications: [ChangeNotification] = []
        _ = try engine.create("o", values: ["list": [1]], notifications: &notifications)  // {"list":[1]}: 12 bytes
        let before = (try engine.get("o", keyPath: nil), engine.revision)
        func refused(_ what: String, _ write: () throws(KVOError) -> Void) {
            do { try write(); Issue.record("\(what) was accepted") } catch { #expect(error.code == .tooLarge, "\(what)") }
            expectEqual((try? engine.get("o", keyPath: nil)), before.0, "\(what) changed the object")
            expectEqual(engine.revision, before.1, "\(what) moved the revision")
        }
        refused("a value over the limit") { () throws(KVOError) in
            _ = try engine.set("o", keyPath: try KeyPath("v"), value: .string(String(repeating: "x", count: 19)), notifications: &notifications)
        }
        refused("an element over the limit") { () throws(KVOError) in
            _ = try engine.mutateArray("o", keyPath: try KeyPath("list"), .insert(indexes: nil, values: [.string(String(repeating: "x", count: 19))]),
                                       notifications: &notifications)
        }
        // 12 + "a":"<16 x>" (1 + 3 + 1 + 18) = 35; then "b" the same = 58; "c" would pass 60.
        _ = try engine.set("o", keyPath: try KeyPath("a"), value: .string(String(repeating: "x", count: 16)), notifications: &notifications)
        _ = try engine.set("o", keyPath: try KeyPath("b"), value: .string(String(repeating: "x", count: 16)), notifications: &notifications)
        expectEqual(engine.objects.size(of: "o"), 58)
        let full = (try engine.get("o", keyPath: nil), engine.revision)
        do {
            _ = try engine.set("o", keyPath: try KeyPath("c"), value: 1, notifications: &notifications)
            Issue.record("growing past the object limit was accepted")
        } catch { #expect(error.code == .tooLarge) }
        do {
            _ = try engine.mutateArray("o", keyPath: try KeyPath("list"), .insert(indexes: [0], values: [22]), notifications: &notifications)
            Issue.record("inserting past the object limit was accepted")
        } catch { #expect(error.code == .tooLarge) }
        expectEqual(try engine.get("o", keyPath: nil), full.0)
        expectEqual(engine.revision, full.1)
        expectEqual(engine.objects.size(of: "o"), 58)
        // Shrinking is always allowed; creating an object over the limit is not.
        _ = try engine.set("o", keyPath: try KeyPath("a"), value: 1, notifications: &notifications)
        expectEqual(engine.objects.size(of: "o"), JSONWriter.bytes(try engine.get("o", keyPath: nil)).count)
        do {
            _ = try engine.create("big", values: ["a": "0123456789", "b": "0123456789", "c": "0123456789", "d": "0123456789"],
                                  notifications: &notifications)
            Issue.record("an object over the limit was created")
        } catch { #expect(error.code == .tooLarge) }
        expectEqual(engine.objectCount, 1)
    }
}
