import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// A signal to S observers costs no more than a `set` of the same payload (issue 43; docs/design.md, "Signals"): the
/// engine makes one notification for every observer of the object, whatever key path or pattern each observes and
/// whatever options each asked for, holding the payload as the request's text; so the fan-out encodes at most two
/// tails (full and compact) and never the payload. A `set` of the same value to observers of as many key paths makes
/// one notification per key path.
@Suite struct SignalEncodingTests {
    @Test func oneNotificationAndAtMostTwoTailsForEveryObserver() throws {
        let engine = KVOEngine()
        _ = try engine.create("room", ["a": 1, "b": ["c": 2]])
        let keyPaths = ["a", "b", "b.c", "a", "b.c"]
        let optionSets: [ObservationOptions] = [[.new], [.old], [.new, .old, .prior], [], [.compactEvents, .old]]
        for index in 0..<100 {
            try engine.observe("room", keyPaths[index % 5], optionSets[index % 5], by: ConnectionID(UInt64(index + 1)))
        }
        var ignored: [ChangeNotification] = []
        for index in 0..<20 {
            _ = try engine.observe(pattern: try ObjectIDPattern(index % 2 == 0 ? "ro*" : "room"), keyPath: nil,
                                   options: index % 3 == 0 ? [.compactEvents] : [.old], connection: ConnectionID(UInt64(200 + index)),
                                   notifications: &ignored)
        }
        let payload = CanonicalText(trusting: Array(#"{"x":120,"y":[48,"é"]}"#.utf8))
        var notifications: [ChangeNotification] = []
        let heard = try engine.signal("room", payload: payload, notifications: &notifications)
        #expect(heard == 120 && notifications.count == 1)
        let signal = try #require(notifications.first)
        #expect(signal.recipients.count == 120 && signal.reason == .signal && signal.keyPath.isEmpty && signal.namesObject)
        // The payload is held as its text: the encoder copies these bytes, it never encodes the value.
        #expect(signal.encodedNew == payload.bytes)
        let variants = Set(signal.recipients.map { EventEncoder(signal).variant(for: $0.options) })
        #expect(variants == [1, 1 | EventEncoder.compactVariantBit], "new only, full or compact: \(variants)")
        var encoder = EventEncoder(signal)
        let full = String(decoding: encoder.tail(variant: 1), as: UTF8.self)
        #expect(full == #","object":"room","reason":"signal","rev":1,"change":{"kind":1,"new":{"x":120,"y":[48,"é"]}}}"# + "\n")
        let compact = String(decoding: encoder.tail(variant: 1 | EventEncoder.compactVariantBit), as: UTF8.self)
        #expect(compact == #","r":1,"t":"room","w":"g","n":{"x":120,"y":[48,"é"]}}"# + "\n")
        // A set of a value observed at several key paths: one notification per key path (and its priors and pattern
        // events besides), each encoded on its own.
        let set = try engine.set("room", "b", ["c": 3])
        #expect(set.count > 2 && Set(set.map(\.keyPath)).isSuperset(of: ["b", "b.c"]) && engine.revision == 2,
                "\(set.map { "\($0.reason) \($0.keyPath)" })")
        // Nothing stored: the signal took no revision and left the object as it was.
        #expect(try engine.value("room", "a") == 1)
    }

    @Test func readersOnlyAndNoSignalForAnObjectOfNoObserver() throws {
        let engine = KVOEngine()
        _ = try engine.create("room", [:])
        _ = try engine.create("lobby", [:])
        let outsider = ConnectionAccess(Principal(user: "o", policy: AccessPolicy(rules: [try AccessRule(argument: "lobby=read")])))
        var ignored: [ChangeNotification] = []
        _ = try engine.observe(pattern: try ObjectIDPattern("*"), keyPath: nil, options: [.new], connection: ConnectionID(1),
                               access: outsider, notifications: &ignored)
        var notifications: [ChangeNotification] = []
        let payload = CanonicalText(trusting: Array("1".utf8))
        #expect(try engine.signal("room", payload: payload, notifications: &notifications) == 0 && notifications.isEmpty)
        #expect(try engine.signal("lobby", payload: payload, notifications: &notifications) == 1)
        let writer = ConnectionAccess(Principal(user: "w", policy: AccessPolicy(rules: [try AccessRule(argument: "room=read")])))
        #expect(throws: KVOError.self) { try engine.signal("room", payload: payload, access: writer, notifications: &notifications) }
    }
}
