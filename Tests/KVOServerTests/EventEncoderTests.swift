import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

private func makeNotification(
    reason: ChangeReason, isPrior: Bool = false, object: String = "person", keyPath: String = "address.city",
    rev: UInt64 = 5, old: JSONValue = "London", new: JSONValue = "Paris"
) -> ChangeNotification {
    ChangeNotification(
        object: object, keyPath: keyPath, reason: reason, rev: rev, kind: .setting, isPrior: isPrior,
        old: old, new: new, recipients: []
    )
}

private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

/// One row of the reason x prior x options matrix, with its exact expected line.
struct EventCase: Sendable, CustomTestStringConvertible {
    let reason: ChangeReason
    let isPrior: Bool
    let options: ObservationOptions
    let expected: String

    var testDescription: String { "\(reason.rawValue)\(isPrior ? " prior" : "") \(options.names)" }

    /// What the notification carries: `initial` events have no meaningful old value (the engine
    /// may put anything there), `sourceDeleted` ones have `new: null`.
    var notification: ChangeNotification {
        switch reason {
        case .initial: makeNotification(reason: reason, isPrior: isPrior, old: "ignored")
        case .valueChanged, .pathChanged, .resync, .signal: makeNotification(reason: reason, isPrior: isPrior)
        case .sourceDeleted: makeNotification(reason: reason, isPrior: isPrior, new: .null)
        case .forbidden: makeNotification(reason: reason, isPrior: isPrior, old: .null, new: .null)
        case .created, .entered: makeNotification(reason: reason, isPrior: isPrior, old: .null)
        case .left: makeNotification(reason: reason, isPrior: isPrior, new: .null)
        }
    }
}

private func head(_ reason: String) -> String {
    #"{"event":"change","sub":7,"object":"person","keyPath":"address.city","reason":"\#(reason)","rev":5,"change":{"kind":1"#
}

let eventCases: [EventCase] = [
    // initial: new when asked, never old.
    EventCase(reason: .initial, isPrior: false, options: [], expected: head("initial") + "}}\n"),
    EventCase(reason: .initial, isPrior: false, options: [.new], expected: head("initial") + #","new":"Paris"}}"# + "\n"),
    EventCase(reason: .initial, isPrior: false, options: [.old], expected: head("initial") + "}}\n"),
    EventCase(reason: .initial, isPrior: false, options: [.new, .old], expected: head("initial") + #","new":"Paris"}}"# + "\n"),
    // valueChanged
    EventCase(reason: .valueChanged, isPrior: false, options: [], expected: head("valueChanged") + "}}\n"),
    EventCase(reason: .valueChanged, isPrior: false, options: [.new], expected: head("valueChanged") + #","new":"Paris"}}"# + "\n"),
    EventCase(reason: .valueChanged, isPrior: false, options: [.old], expected: head("valueChanged") + #","old":"London"}}"# + "\n"),
    EventCase(reason: .valueChanged, isPrior: false, options: [.new, .old],
              expected: head("valueChanged") + #","new":"Paris","old":"London"}}"# + "\n"),
    // valueChanged, prior: never new, old when asked.
    EventCase(reason: .valueChanged, isPrior: true, options: [],
              expected: head("valueChanged") + #","notificationIsPrior":true}}"# + "\n"),
    EventCase(reason: .valueChanged, isPrior: true, options: [.new],
              expected: head("valueChanged") + #","notificationIsPrior":true}}"# + "\n"),
    EventCase(reason: .valueChanged, isPrior: true, options: [.old],
              expected: head("valueChanged") + #","notificationIsPrior":true,"old":"London"}}"# + "\n"),
    EventCase(reason: .valueChanged, isPrior: true, options: [.new, .old],
              expected: head("valueChanged") + #","notificationIsPrior":true,"old":"London"}}"# + "\n"),
    // forbidden: the observation ended; no value either way.
    EventCase(reason: .forbidden, isPrior: false, options: [.new, .old],
              expected: head("forbidden") + #","new":null,"old":null}}"# + "\n"),
    // sourceDeleted: new is null.
    EventCase(reason: .sourceDeleted, isPrior: false, options: [], expected: head("sourceDeleted") + "}}\n"),
    EventCase(reason: .sourceDeleted, isPrior: false, options: [.new], expected: head("sourceDeleted") + #","new":null}}"# + "\n"),
    EventCase(reason: .sourceDeleted, isPrior: false, options: [.old],
              expected: head("sourceDeleted") + #","old":"London"}}"# + "\n"),
    EventCase(reason: .sourceDeleted, isPrior: false, options: [.new, .old],
              expected: head("sourceDeleted") + #","new":null,"old":"London"}}"# + "\n"),
    // sourceDeleted, prior.
    EventCase(reason: .sourceDeleted, isPrior: true, options: [],
              expected: head("sourceDeleted") + #","notificationIsPrior":true}}"# + "\n"),
    EventCase(reason: .sourceDeleted, isPrior: true, options: [.new],
              expected: head("sourceDeleted") + #","notificationIsPrior":true}}"# + "\n"),
    EventCase(reason: .sourceDeleted, isPrior: true, options: [.old],
              expected: head("sourceDeleted") + #","notificationIsPrior":true,"old":"London"}}"# + "\n"),
    EventCase(reason: .sourceDeleted, isPrior: true, options: [.new, .old],
              expected: head("sourceDeleted") + #","notificationIsPrior":true,"old":"London"}}"# + "\n"),
]

@Suite("EventEncoder")
struct EventEncoderTests {
    @Test("the exact line for each reason, prior and new/old options", arguments: eventCases)
    func exactLine(row: EventCase) {
        var encoder = EventEncoder(row.notification)
        expectEqual(text(encoder.line(subscription: 7, options: row.options)), row.expected)
        // The initial and prior options say when to notify, not what the change dictionary holds.
        var other = EventEncoder(row.notification)
        expectEqual(text(other.line(subscription: 7, options: row.options.union([.initial, .prior]))), row.expected)
    }

    @Test("the line parses as JSON with the documented fields", arguments: eventCases)
    func parsesAsDocumented(row: EventCase) throws {
        var encoder = EventEncoder(row.notification)
        let line = encoder.line(subscription: 7, options: row.options)
        expectEqual(line.last, 0x0A)
        expectEqual(line.filter { $0 == 0x0A }.count, 1)
        let event = try JSONParser.parse(Array(line.dropLast()))
        guard case let .object(fields) = event, case let .object(change)? = fields["change"] else {
            Issue.record("not an event object: \(event)")
            return
        }
        expectEqual(Set(fields.keys), ["event", "sub", "object", "keyPath", "reason", "rev", "change"])
        expectEqual(fields["event"], "change")
        expectEqual(fields["sub"].map { strictlyEqual($0, .int(7)) }, true)
        expectEqual(fields["object"], "person")
        expectEqual(fields["keyPath"], "address.city")
        expectEqual(fields["reason"], .string(row.reason.rawValue))
        expectEqual(fields["rev"].map { strictlyEqual($0, .int(5)) }, true)
        expectEqual(change["kind"].map { strictlyEqual($0, .int(1)) }, true)

        let wantsNew = row.options.contains(.new) && !row.isPrior
        let wantsOld = row.options.contains(.old) && row.reason != .initial
        expectEqual(change.keys.contains("new"), wantsNew)
        expectEqual(change.keys.contains("old"), wantsOld)
        if wantsNew { #expect(change["new"] == (row.reason == .sourceDeleted || row.reason == .forbidden ? .null : "Paris")) }
        if wantsOld { #expect(change["old"] == (row.reason == .forbidden ? .null : "London")) }
        if row.isPrior {
            expectEqual(change["notificationIsPrior"], .bool(true))
        } else {
            #expect(!change.keys.contains("notificationIsPrior"))
        }
        var expectedKeys: Set<String> = ["kind"]
        if wantsNew { expectedKeys.insert("new") }
        if wantsOld { expectedKeys.insert("old") }
        if row.isPrior { expectedKeys.insert("notificationIsPrior") }
        expectEqual(Set(change.keys), expectedKeys)
    }

    @Test("the line is head + sub + tail, with the sub id spliced in", arguments: [0, 1, 7, 42, 1_000_000, Int64.max])
    func subSpliced(sub: Int64) throws {
        var encoder = EventEncoder(makeNotification(reason: .valueChanged))
        let line = encoder.line(subscription: sub, options: [.new])
        expectEqual(Array(line.prefix(EventEncoder.head.count)), EventEncoder.head)
        expectEqual(text(EventEncoder.head), #"{"event":"change","sub":"#)
        let tail = encoder.tail(for: [.new])
        expectEqual(line, EventEncoder.head + Array(String(sub).utf8) + tail)
        expectEqual(text(Array(line.suffix(tail.count))), #","object":"person","keyPath":"address.city","reason":"valueChanged","rev":5,"change":{"kind":1,"new":"Paris"}}"# + "\n")
        let parsed = try JSONParser.parse(Array(line.dropLast()))
        expectEqual(parsed["sub"].map { strictlyEqual($0, .int(sub)) }, true)
    }

    @Test("recipients with the same options get the same tail bytes, shared")
    func tailsReused() {
        var encoder = EventEncoder(makeNotification(reason: .valueChanged))
        let first = encoder.line(subscription: 1, options: [.new, .old])
        let second = encoder.line(subscription: 22, options: [.new, .old])
        expectEqual(first.dropFirst(EventEncoder.head.count + 1), second.dropFirst(EventEncoder.head.count + 2))
        #expect(text(first).hasPrefix(#"{"event":"change","sub":1,"object":"#))
        #expect(text(second).hasPrefix(#"{"event":"change","sub":22,"object":"#))

        let tailA = encoder.tail(for: [.new, .old])
        let tailB = encoder.tail(for: [.old, .new, .initial])
        expectEqual(tailA, tailB)
        // Built once: the second recipient's tail is the same storage, not a re-encoding.
        let storageA = tailA.withUnsafeBufferPointer { $0.baseAddress }
        let storageB = tailB.withUnsafeBufferPointer { $0.baseAddress }
        expectEqual(storageA, storageB)
        // A different variant is a different tail.
        #expect(encoder.tail(for: [.new]) != tailA)
        #expect(encoder.tail(for: [.old]) != encoder.tail(for: [.new]))
    }

    @Test("asking for the variants in any order gives each its own tail")
    func variantsDoNotMix() {
        let variants: [ObservationOptions] = [[], [.new], [.old], [.new, .old]]
        for reason in [ChangeReason.valueChanged, .sourceDeleted] {
            for isPrior in [false, true] {
                let note = makeNotification(reason: reason, isPrior: isPrior)
                var reference: [[UInt8]] = []
                for options in variants {
                    var fresh = EventEncoder(note)
                    reference.append(fresh.tail(for: options))
                }
                var shared = EventEncoder(note)
                for index in [3, 1, 2, 0, 1, 3, 0, 2] {
                    expectEqual(shared.tail(for: variants[index]), reference[index], "\(reason) prior=\(isPrior) \(variants[index].names)")
                }
            }
        }
    }

    @Test("object, key path and values are JSON-encoded (escaped, sorted keys)")
    func encodedContents() throws {
        let note = makeNotification(
            reason: .valueChanged, object: "we\"ird\\name\n", keyPath: "a.é", rev: 123_456_789,
            old: .object(["z": .int(1), "a": .array([.double(2.5), .null])]), new: .int(-3)
        )
        var encoder = EventEncoder(note)
        let line = text(encoder.line(subscription: 9, options: [.new, .old]))
        #expect(line == #"{"event":"change","sub":9,"object":"we\"ird\\name\n","keyPath":"a.é","reason":"valueChanged","rev":123456789,"change":{"kind":1,"new":-3,"old":{"a":[2.5,null],"z":1}}}"# + "\n")
        let parsed = try JSONParser.parse(String(line.dropLast()))
        expectEqual(parsed["object"], "we\"ird\\name\n")
        expectEqual(parsed["keyPath"], "a.é")
    }

    @Test("initial events carry new, even when it is null, and never old")
    func initialNull() {
        var encoder = EventEncoder(makeNotification(reason: .initial, old: "x", new: .null))
        #expect(text(encoder.line(subscription: 3, options: [.new, .old, .initial]))
            == #"{"event":"change","sub":3,"object":"person","keyPath":"address.city","reason":"initial","rev":5,"change":{"kind":1,"new":null}}"# + "\n")
    }
}

/// A notification, the options of its recipient and the exact `change` dictionary it must get.
struct ChangeDictionaryCase: Sendable, CustomTestStringConvertible {
    let name: String
    let reason: ChangeReason
    let kind: ChangeKind
    let isPrior: Bool
    let indexes: [Int]?
    let old: JSONValue
    let new: JSONValue
    let options: ObservationOptions
    let change: String

    var testDescription: String { name }
}

let changeDictionaryCases: [ChangeDictionaryCase] = [
    // pathChanged is an ordinary change as far as the dictionary goes.
    ChangeDictionaryCase(name: "pathChanged new+old", reason: .pathChanged, kind: .setting, isPrior: false, indexes: nil,
                         old: "London", new: "Paris", options: [.new, .old], change: #"{"kind":1,"new":"Paris","old":"London"}"#),
    ChangeDictionaryCase(name: "pathChanged to a broken path", reason: .pathChanged, kind: .setting, isPrior: false,
                         indexes: nil, old: "London", new: .null, options: [.new], change: #"{"kind":1,"new":null}"#),
    ChangeDictionaryCase(name: "pathChanged prior", reason: .pathChanged, kind: .setting, isPrior: true, indexes: nil,
                         old: "London", new: "Paris", options: [.new, .old],
                         change: #"{"kind":1,"notificationIsPrior":true,"old":"London"}"#),
    // Kind 2: new (the inserted elements), never old.
    ChangeDictionaryCase(name: "insertion new+old", reason: .valueChanged, kind: .insertion, isPrior: false, indexes: [1, 2],
                         old: .null, new: ["x", "y"], options: [.new, .old],
                         change: #"{"kind":2,"indexes":[1,2],"new":["x","y"]}"#),
    ChangeDictionaryCase(name: "insertion old only", reason: .valueChanged, kind: .insertion, isPrior: false, indexes: [0],
                         old: .null, new: ["x"], options: [.old], change: #"{"kind":2,"indexes":[0]}"#),
    ChangeDictionaryCase(name: "insertion prior", reason: .valueChanged, kind: .insertion, isPrior: true, indexes: [1, 2],
                         old: .null, new: ["x", "y"], options: [.new, .old],
                         change: #"{"kind":2,"indexes":[1,2],"notificationIsPrior":true}"#),
    // Kind 3: old (the removed elements), never new.
    ChangeDictionaryCase(name: "removal new+old", reason: .valueChanged, kind: .removal, isPrior: false, indexes: [0],
                         old: ["a"], new: .null, options: [.new, .old], change: #"{"kind":3,"indexes":[0],"old":["a"]}"#),
    ChangeDictionaryCase(name: "removal new only", reason: .valueChanged, kind: .removal, isPrior: false, indexes: [0, 4],
                         old: ["a", "e"], new: .null, options: [.new], change: #"{"kind":3,"indexes":[0,4]}"#),
    ChangeDictionaryCase(name: "removal prior", reason: .valueChanged, kind: .removal, isPrior: true, indexes: [0],
                         old: ["a"], new: .null, options: [.new, .old],
                         change: #"{"kind":3,"indexes":[0],"notificationIsPrior":true,"old":["a"]}"#),
    // Kind 4: both.
    ChangeDictionaryCase(name: "replacement new+old", reason: .valueChanged, kind: .replacement, isPrior: false,
                         indexes: [0, 3], old: ["a", "d"], new: ["A", "D"], options: [.new, .old],
                         change: #"{"kind":4,"indexes":[0,3],"new":["A","D"],"old":["a","d"]}"#),
    ChangeDictionaryCase(name: "replacement prior", reason: .valueChanged, kind: .replacement, isPrior: true,
                         indexes: [0, 3], old: ["a", "d"], new: ["A", "D"], options: [.new, .old],
                         change: #"{"kind":4,"indexes":[0,3],"notificationIsPrior":true,"old":["a","d"]}"#),
]

@Suite("EventEncoder: pathChanged and array kinds")
struct EventEncoderChangeKindTests {
    @Test("the change dictionary for pathChanged and kinds 2-4", arguments: changeDictionaryCases)
    func changeDictionary(row: ChangeDictionaryCase) throws {
        let note = ChangeNotification(
            object: "cart", keyPath: "items", reason: row.reason, rev: 12, kind: row.kind, isPrior: row.isPrior,
            old: row.old, new: row.new, indexes: row.indexes, recipients: []
        )
        var encoder = EventEncoder(note)
        let line = String(decoding: encoder.line(subscription: 4, options: row.options), as: UTF8.self)
        #expect(line == #"{"event":"change","sub":4,"object":"cart","keyPath":"items","reason":"\#(row.reason.rawValue)","rev":12,"change":"#
            + row.change + "}\n")
        let event = try JSONParser.parse(String(line.dropLast()))
        expectEqual(event["change"]?["kind"], .int(Int64(row.kind.rawValue)))
    }
}

@Suite("EventEncoder, compact")
struct CompactEventEncoderTests {
    @Test("the compact line of each reason, kind and prior: defaults left out, no object or key path")
    func compactLines() {
        let cases: [(ChangeNotification, ObservationOptions, String)] = [
            (makeNotification(reason: .valueChanged), [.new], #"{"s":7,"r":5,"n":"Paris"}"#),
            (makeNotification(reason: .valueChanged), [.new, .old], #"{"s":7,"r":5,"n":"Paris","o":"London"}"#),
            (makeNotification(reason: .valueChanged, isPrior: true), [.new, .old, .prior], #"{"s":7,"r":5,"p":1,"o":"London"}"#),
            (makeNotification(reason: .initial, old: "ignored"), [.new, .old, .initial], #"{"s":7,"r":5,"w":"i","n":"Paris"}"#),
            (makeNotification(reason: .pathChanged), [.new, .old], #"{"s":7,"r":5,"w":"p","n":"Paris","o":"London"}"#),
            (makeNotification(reason: .sourceDeleted, new: .null), [.new, .old], #"{"s":7,"r":5,"w":"s","n":null,"o":"London"}"#),
            (makeNotification(reason: .forbidden, old: .null, new: .null), [.new, .old], #"{"s":7,"r":5,"w":"f","n":null,"o":null}"#),
            (makeNotification(reason: .resync), [.old], #"{"s":7,"r":5,"w":"r","n":"Paris"}"#),
            (ChangeNotification(object: "o", keyPath: "items", reason: .valueChanged, rev: 9, kind: .insertion, isPrior: false,
                                old: .null, new: [1, 2], indexes: [0, 3], recipients: []), [.new, .old],
             #"{"s":7,"r":9,"2":[0,3],"n":[1,2]}"#),
            (ChangeNotification(object: "o", keyPath: "items", reason: .valueChanged, rev: 9, kind: .removal, isPrior: false,
                                old: [1], new: .null, indexes: [4], recipients: []), [.new, .old],
             #"{"s":7,"r":9,"3":[4],"o":[1]}"#),
            (ChangeNotification(object: "o", keyPath: "items", reason: .valueChanged, rev: 9, kind: .replacement, isPrior: true,
                                old: [1], new: [2], indexes: [4], recipients: []), [.new, .old, .prior],
             #"{"s":7,"r":9,"p":1,"4":[4],"o":[1]}"#),
            // A prior notification of another reason: `p` carries its code (no `w`).
            (makeNotification(reason: .sourceDeleted, isPrior: true), [.new, .old, .prior], #"{"s":7,"r":5,"p":"s","o":"London"}"#),
            (makeNotification(reason: .pathChanged, isPrior: true), [.new, .old, .prior], #"{"s":7,"r":5,"p":"p","o":"London"}"#),
        ]
        for (notification, options, expected) in cases {
            var encoder = EventEncoder(notification)
            let compact = options.union(.compactEvents)
            expectEqual(text(encoder.line(subscription: 7, options: compact)), expected + "\n")
            // Never longer than the full line, so EventSizeBound (the full encoding's) holds for both.
            #expect(encoder.line(subscription: 7, options: compact).count < encoder.line(subscription: 7, options: options).count)
            expectEqual(encoder.variant(for: compact), encoder.variant(for: options) | EventEncoder.compactVariantBit)
        }
    }
}
