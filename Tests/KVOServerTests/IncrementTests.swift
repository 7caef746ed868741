import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `increment` (issue 25's demonstration of the operations table): its arithmetic, its refusals (which
/// change nothing), and that it notifies, validates and checks permissions exactly as `set` does.
@Suite struct IncrementTests {
    private func engine() throws -> (KVOEngine, RequestHandler) {
        let engine = KVOEngine(historyLimit: 100, historyByteLimit: 1 << 20)
        let handler = RequestHandler(engine: engine)
        var notifications: [ChangeNotification] = []
        _ = try engine.create("o", values: ["i": .int(40), "d": .double(0.5), "s": .string("x"), "z": .null,
                                            "big": .int(Int64.max - 1), "nested": ["count": .int(1)]],
                              notifications: &notifications)
        return (engine, handler)
    }

    private func increment(_ handler: RequestHandler, _ line: String, access: ConnectionAccess = .open(),
                           notifications: inout [ChangeNotification]) -> Result<ReplyFields, KVOError> {
        let decoded = RequestDecoder.decode(Array(line.utf8))
        guard case let .success(request) = decoded.request else {
            if case let .failure(error) = decoded.request { return .failure(error) }
            return .failure(KVOError(.badRequest, "?"))
        }
        return handler.handle(request, from: ConnectionID(1), access: access, notifications: &notifications).reply
    }

    private func value(_ reply: Result<ReplyFields, KVOError>) -> JSONValue? {
        guard case let .success(fields) = reply else { return nil }
        return fields.first { $0.0 == "value" }?.1
    }

    @Test("integers stay integers, a double step or value makes a double, missing and null count as 0, by defaults to 1",
          arguments: [
              (#"{"op":"increment","object":"o","keyPath":"i","by":2}"#, JSONValue.int(42)),
              (#"{"op":"increment","object":"o","keyPath":"i"}"#, .int(41)),
              (#"{"op":"increment","object":"o","keyPath":"i","by":-50}"#, .int(-10)),
              (#"{"op":"increment","object":"o","keyPath":"i","by":0.5}"#, .double(40.5)),
              (#"{"op":"increment","object":"o","keyPath":"d","by":2}"#, .double(2.5)),
              (#"{"op":"increment","object":"o","keyPath":"missing","by":3}"#, .int(3)),
              (#"{"op":"increment","object":"o","keyPath":"z","by":1.25}"#, .double(1.25)),
              (#"{"op":"increment","object":"o","keyPath":"nested.count","by":9}"#, .int(10)),
          ])
    func arithmetic(line: String, expected: JSONValue) throws {
        let (engine, handler) = try engine()
        var notifications: [ChangeNotification] = []
        let reply = increment(handler, line, notifications: &notifications)
        expectEqual(value(reply), expected)
        let keyPath = try RequestDecoder.decode(Array(line.utf8)).request.get()
        guard case let .increment(_, path, _) = keyPath else { Issue.record("not an increment"); return }
        expectEqual(try engine.get("o", keyPath: path), expected)
    }

    @Test("refusals change nothing: not a number, past 64 bits, a bad step, no key path, a missing object",
          arguments: [
              (#"{"op":"increment","object":"o","keyPath":"s"}"#, KVOError.Code.typeMismatch),
              (#"{"op":"increment","object":"o","keyPath":"nested"}"#, .typeMismatch),
              (#"{"op":"increment","object":"o","keyPath":"big","by":2}"#, .outOfRange),
              (#"{"op":"increment","object":"o","keyPath":"i","by":"1"}"#, .badRequest),
              (#"{"op":"increment","object":"o","keyPath":"i","by":[1]}"#, .badRequest),
              (#"{"op":"increment","object":"o"}"#, .badRequest),
              (#"{"op":"increment","object":"nobody","keyPath":"i"}"#, .notFound),
          ])
    func refusals(line: String, code: KVOError.Code) throws {
        let (engine, handler) = try engine()
        let before = StateDigest.of(engine, users: nil)
        var notifications: [ChangeNotification] = []
        let reply = increment(handler, line, notifications: &notifications)
        guard case let .failure(error) = reply else {
            Issue.record("\(line) was accepted")
            return
        }
        expectEqual(error.code, code, "\(error)")
        expectEqual(StateDigest.of(engine, users: nil), before)
        #expect(notifications.isEmpty)
    }

    @Test("an increment past the largest double is out_of_range and changes nothing")
    func infiniteSum() throws {
        let (engine, handler) = try engine()
        var notifications: [ChangeNotification] = []
        _ = increment(handler, #"{"op":"set","object":"o","keyPath":"d","value":1.7e308}"#, notifications: &notifications)
        let before = StateDigest.of(engine, users: nil)
        let reply = increment(handler, #"{"op":"increment","object":"o","keyPath":"d","by":1.7e308}"#, notifications: &notifications)
        guard case let .failure(error) = reply else {
            Issue.record("accepted")
            return
        }
        expectEqual(error.code, .outOfRange)
        expectEqual(StateDigest.of(engine, users: nil), before)
    }

    @Test("observers get the change as a set's: kind 1 with old and new")
    func notifiesLikeSet() throws {
        let (engine, handler) = try engine()
        var notifications: [ChangeNotification] = []
        let sub = try engine.observe("o", keyPath: KeyPath("i"), options: [.new, .old], connection: ConnectionID(7),
                                     sinceRev: nil, notifications: &notifications)
        notifications.removeAll()
        _ = increment(handler, #"{"op":"increment","object":"o","keyPath":"i","by":2}"#, notifications: &notifications)
        expectEqual(notifications.count, 1)
        let event = try #require(notifications.first)
        expectEqual(event.recipients.map(\.subscription), [sub])
        var encoder = EventEncoder(event)
        let line = String(decoding: encoder.line(subscription: sub, options: [.new, .old]), as: UTF8.self)
        #expect(line.contains(#""kind":1"#) && line.contains(#""new":42"#) && line.contains(#""old":40"#), "\(line)")
    }

    @Test("a class's rules apply: a double step into an integer property is invalid_value")
    func classRulesApply() throws {
        let engine = KVOEngine(historyLimit: 100, historyByteLimit: 1 << 20)
        let handler = RequestHandler(engine: engine)
        var notifications: [ChangeNotification] = []
        for line in [
            #"{"op":"defineClass","class":{"name":"Counter","properties":{"n":{"type":"integer","max":10}}}}"#,
            #"{"op":"create","object":"c","class":"Counter","values":{"n":9}}"#,
        ] {
            if case let .failure(error) = increment(handler, line, notifications: &notifications) { throw error }
        }
        for line in [#"{"op":"increment","object":"c","keyPath":"n","by":0.5}"#, #"{"op":"increment","object":"c","keyPath":"n","by":2}"#] {
            guard case let .failure(error) = increment(handler, line, notifications: &notifications) else {
                Issue.record("\(line) was accepted")
                continue
            }
            expectEqual(error.code, .invalidValue, "\(error)")
        }
        expectEqual(value(increment(handler, #"{"op":"increment","object":"c","keyPath":"n"}"#, notifications: &notifications)), .int(10))
    }

    /// `set` of `$class` is `read_only`; so are `increment` (which read the class name, a string, and answered
    /// `type_mismatch`) and the array operations, on an object of a class and on one without (no `$class` key).
    @Test("$class is read_only for increment and the array operations as for set, whatever the object holds",
          arguments: ["c", "o"])
    func classKeyIsReadOnly(object: String) throws {
        let (engine, handler) = try engine()
        var notifications: [ChangeNotification] = []
        for line in [#"{"op":"defineClass","class":{"name":"Counter","properties":{"n":{"type":"integer"}}}}"#,
                     #"{"op":"create","object":"c","class":"Counter","values":{"n":1}}"#] {
            if case let .failure(error) = increment(handler, line, notifications: &notifications) { throw error }
        }
        let before = StateDigest.of(engine, users: nil)
        for line in [
            #"{"op":"set","object":"\#(object)","keyPath":"$class","value":"Other"}"#,
            #"{"op":"increment","object":"\#(object)","keyPath":"$class"}"#,
            #"{"op":"increment","object":"\#(object)","keyPath":"$class","by":2.5}"#,
            #"{"op":"insert","object":"\#(object)","keyPath":"$class","index":0,"value":1}"#,
            #"{"op":"remove","object":"\#(object)","keyPath":"$class","index":0}"#,
            #"{"op":"replace","object":"\#(object)","keyPath":"$class","index":0,"value":1}"#,
        ] {
            notifications.removeAll()
            guard case let .failure(error) = increment(handler, line, notifications: &notifications) else {
                Issue.record("\(line) was accepted")
                continue
            }
            expectEqual(error.code, .readOnly, "\(line): \(error)")
            expectEqual(error.details["property"], "$class", "\(line)")
            #expect(notifications.isEmpty)
        }
        expectEqual(StateDigest.of(engine, users: nil), before)
    }

    @Test("it needs read and write: a reader or a writer alone is forbidden and nothing changes",
          arguments: ["o=read", "o=write"])
    func needsReadAndWrite(rule: String) throws {
        let (engine, handler) = try engine()
        let before = StateDigest.of(engine, users: nil)
        var notifications: [ChangeNotification] = []
        let access = ConnectionAccess(Principal(user: "u", policy: AccessPolicy(rules: [try AccessRule(argument: rule)])))
        let reply = increment(handler, #"{"op":"increment","object":"o","keyPath":"i"}"#, access: access, notifications: &notifications)
        guard case let .failure(error) = reply else {
            Issue.record("allowed with \(rule)")
            return
        }
        expectEqual(error.code, .forbidden)
        expectEqual(StateDigest.of(engine, users: nil), before)
        let both = ConnectionAccess(Principal(user: "u", policy: AccessPolicy(rules: [try AccessRule(argument: "o=read,write")])))
        expectEqual(value(increment(handler, #"{"op":"increment","object":"o","keyPath":"i"}"#, access: both, notifications: &notifications)), .int(41))
    }
}
