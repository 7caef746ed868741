import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// A subscriber that loses its stream part-way and resumes with `sinceRev`, checked against a
/// subscriber that never lost it.
///
/// The same writes go to two real servers: the *subject* (the kvod under test) and a *reference*, a
/// twin `--in-memory` kvod that starts from the same state, so both assign the same revisions. A
/// reference observer stays connected throughout and sees every event live. On the subject, the
/// subscriber observes the same key paths, reads events up to a marker, then loses its stream in
/// whatever way the test's `disrupt` step chooses (closing it, restarting kvod) while writes go on;
/// then it observes again on a new connection with `sinceRev` = the last revision it saw for each key
/// path. For every key path, what it saw before plus what it got after must equal what the reference
/// observer saw: complete, in order, no duplicates, the same `old`/`new` values, kinds and indexes.
///
/// The writes cover every kind of event: sets (`valueChanged`), array insertions, removals and
/// replacements (kinds 2-4, and `@count`/`@sum`), re-pointed references and a deleted and re-created
/// target (`pathChanged`), and a deleted observed object (`sourceDeleted`), with `prior` notifications.
final class ResumeScenario {
    /// The observed key paths: (object, key path).
    static let observed: [(object: String, keyPath: String)] = [
        ("doc", "title"), ("doc", "items"), ("doc", "items.@count"), ("doc", "items.@sum"), ("doc", "ref.name"),
        ("b", "name"),
    ]
    static let options: [String] = ["new", "old", "prior"]

    let subject: KVODProcess
    let reference: KVODProcess
    /// The subject's subscriber until the disruption.
    let subscriber: KVOConnection
    private var subjectWriter: KVOConnection
    private let referenceWriter: KVOConnection
    private let referenceObserver: KVOConnection
    private var workload = Workload()
    /// The revision of the latest write.
    private(set) var revision: Int64 = 0

    /// Starts the reference twin, creates the objects on both servers and observes on both.
    init(subject: KVODProcess) throws {
        self.subject = subject
        reference = try KVODProcess()
        subjectWriter = try subject.connect()
        referenceWriter = try reference.connect()
        subscriber = try subject.connect()
        referenceObserver = try reference.connect()
        try apply("create", ["object": "a", "values": ["name": "A0"]])
        try apply("create", ["object": "b", "values": ["name": "B0"]])
        try apply("create", ["object": "doc", "values": ["title": "t0", "items": [], "ref": ["$ref": "a"]]])
    }

    /// Sends further writes to the subject through `connection` (after a restart, say).
    func writeThrough(_ connection: KVOConnection) throws {
        subjectWriter = connection
    }

    /// Makes the next `operations` writes of the workload on both servers.
    func write(operations: Int) throws {
        for _ in 0..<operations {
            for (op, params) in workload.next() { try apply(op, params) }
        }
    }

    /// Runs the scenario: 20 writes read live, `disrupt` (which returns the server to resume on),
    /// the resume, 20 more writes live, and the comparison.
    func run(disrupt: (ResumeScenario) throws -> KVODProcess, sourceLocation: SourceLocation = #_sourceLocation) throws {
        var lastSeen: [String: Int64] = [:]
        var seen: [String: [JSONValue]] = [:]
        var subjectKeys: [Int64: String] = [:]
        for (object, keyPath) in Self.observed {
            let key = Self.key(object, keyPath)
            let reply = try subscriber.observe(object: object, keyPath: keyPath, options: Self.options)
            #expect(reply.rev == revision, "observe reply rev", sourceLocation: sourceLocation)
            lastSeen[key] = reply.rev ?? revision
            subjectKeys[reply.sub] = key
            try referenceObserver.observe(object: object, keyPath: keyPath, options: Self.options)
        }

        try write(operations: 20)
        try apply("set", ["object": "doc", "keyPath": "title", "value": "cut"])
        for event in try Self.readEvents(subscriber, until: Self.isTitle("cut")) {
            let key = try #require(event["sub"]?.intValue.flatMap { subjectKeys[$0] }, "\(event)")
            seen[key, default: []].append(Self.withoutSub(event))
            if event["change"]?["notificationIsPrior"] != .bool(true) { lastSeen[key] = event["rev"]?.intValue }
        }

        let server = try disrupt(self)
        let resumed = try server.connect()
        var resumedKeys: [Int64: String] = [:]
        for (object, keyPath) in Self.observed {
            let key = Self.key(object, keyPath)
            let reply = try resumed.observe(object: object, keyPath: keyPath, options: Self.options, sinceRev: lastSeen[key])
            #expect(reply.rev == revision, "resumed observe reply rev for \(key)", sourceLocation: sourceLocation)
            resumedKeys[reply.sub] = key
        }
        let resumedAt = revision
        try write(operations: 20)
        try apply("set", ["object": "doc", "keyPath": "title", "value": "end"])

        var after: [String: [JSONValue]] = [:]
        for event in try Self.readEvents(resumed, until: Self.isTitle("end")) {
            let key = try #require(event["sub"]?.intValue.flatMap { resumedKeys[$0] }, "\(event)")
            after[key, default: []].append(Self.withoutSub(event))
        }
        var expected: [String: [JSONValue]] = [:]
        for event in try Self.readEvents(referenceObserver, until: Self.isTitle("end")) {
            let key = Self.key(event["object"]?.stringValue ?? "?", event["keyPath"]?.stringValue ?? "?")
            expected[key, default: []].append(Self.withoutSub(event))
        }

        var replayed = 0
        for (object, keyPath) in Self.observed {
            let key = Self.key(object, keyPath)
            let kept = (seen[key] ?? []).filter { ($0["rev"]?.intValue ?? 0) <= lastSeen[key]! }
            let stream = kept + (after[key] ?? [])
            #expect(stream == expected[key] ?? [], "\(object) \(keyPath) resumed after rev \(lastSeen[key]!)",
                    sourceLocation: sourceLocation)
            replayed += (after[key] ?? []).count(where: { ($0["rev"]?.intValue ?? 0) <= resumedAt })
        }
        // The disruption must have cost the subscriber events that only the replay delivered.
        #expect(replayed >= 20, "only \(replayed) events replayed", sourceLocation: sourceLocation)
        #expect(expected[Self.key("b", "name")]?.last?["reason"] == "sourceDeleted", sourceLocation: sourceLocation)
    }

    /// One write on both servers; both must accept it with the same revision.
    private func apply(_ op: String, _ params: [String: JSONValue]) throws {
        let subjectRev = try subjectWriter.call(op, params)["rev"]?.intValue
        let referenceRev = try referenceWriter.call(op, params)["rev"]?.intValue
        expectEqual(subjectRev, referenceRev, "\(op) \(params): subject rev \(subjectRev ?? -1), reference \(referenceRev ?? -1)")
        revision = try #require(referenceRev)
    }

    private static func key(_ object: String, _ keyPath: String) -> String { "\(object) \(keyPath)" }

    private static func withoutSub(_ event: JSONValue) -> JSONValue {
        guard var fields = event.objectValue else { return event }
        fields["sub"] = nil
        return .object(fields)
    }

    /// Matches the ordinary (not prior) event of setting `doc.title` to `value`.
    private static func isTitle(_ value: JSONValue) -> (JSONValue) -> Bool {
        { event in
            event["object"] == "doc" && event["keyPath"] == "title" && event["change"]?["new"] == value
                && event["change"]?["notificationIsPrior"] != .bool(true)
        }
    }

    /// Reads events up to and including the first that matches `last`; fails after `timeout`
    /// seconds without one.
    private static func readEvents(_ connection: KVOConnection, until last: (JSONValue) -> Bool,
                                   timeout: Double = 20) throws -> [JSONValue] {
        var events: [JSONValue] = []
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            guard let event = try connection.nextEvent(timeout: max(0, deadline.timeIntervalSinceNow)) else {
                Issue.record("no closing event within \(timeout) s after \(events.count) events: \(events.suffix(3))")
                throw ResumeScenarioError.missingEvent
            }
            events.append(event)
            if last(event) { return events }
        }
    }
}

/// The scenario could not go on.
enum ResumeScenarioError: Error {
    /// An expected event did not arrive.
    case missingEvent
}

/// A deterministic sequence of writes to `doc` (`title`, `items`, `ref`), `a` and `b` that produces
/// every kind of event; every write is valid given the ones before it.
struct Workload {
    private var index = 0
    private var itemCount = 0
    private var refersToB = false

    /// The next step: one write, or at step 27 the deletion and re-creation of `b`.
    mutating func next() -> [(op: String, params: [String: JSONValue])] {
        defer { index += 1 }
        let i = Int64(index)
        if index == 27 {
            return [("delete", ["object": "b"]), ("create", ["object": "b", "values": ["name": "reborn"]])]
        }
        let step = index % 6
        if step == 0, index % 12 == 0 {
            // Two values at positions 0 and last of the result.
            itemCount += 2
            return [("insert", ["object": "doc", "keyPath": "items", "values": [.int(i), .double(Double(i) + 0.5)],
                                "indexes": [0, .int(Int64(itemCount - 1))]])]
        }
        // Insert instead when there is too little to replace or remove.
        let tooFew = (step == 2 && itemCount == 0) || (step == 5 && itemCount < 2)
        switch tooFew ? 0 : step {
        case 0:
            let position = Int64(index % (itemCount + 1))
            itemCount += 1
            return [("insert", ["object": "doc", "keyPath": "items", "value": .int(i), "index": .int(position)])]
        case 1:
            return [("set", ["object": "doc", "keyPath": "title", "value": .string("t\(i)")])]
        case 2:
            return [("replace", ["object": "doc", "keyPath": "items", "index": .int(Int64(index % itemCount)),
                                 "value": index % 4 == 0 ? .string("r\(i)") : .int(i * 10)])]
        case 3:
            refersToB.toggle()
            return [("set", ["object": "doc", "keyPath": "ref", "value": ["$ref": refersToB ? "b" : "a"]])]
        case 4:
            return [("set", ["object": index % 12 == 4 ? "a" : "b", "keyPath": "name", "value": .string("N\(i)")])]
        default:
            itemCount -= 2
            return [("remove", ["object": "doc", "keyPath": "items", "indexes": [0, .int(Int64(itemCount + 1))]])]
        }
    }
}
