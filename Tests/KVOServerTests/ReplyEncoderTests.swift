import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

private func success(id: JSONValue?, _ fields: [(String, JSONValue)] = []) -> String {
    var buffer: [UInt8] = []
    ReplyEncoder.success(id: id, fields: fields, into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
}

private func failure(id: JSONValue?, _ code: KVOError.Code, _ message: String) -> String {
    var buffer: [UInt8] = []
    ReplyEncoder.failure(id: id, error: KVOError(code, message), into: &buffer)
    return String(decoding: buffer, as: UTF8.self)
}

/// The reply line without its newline, parsed.
private func parsed(_ line: String) throws -> JSONValue {
    #expect(line.hasSuffix("\n"))
    expectEqual(line.utf8.filter { $0 == 0x0A }.count, 1, "a reply is exactly one line")
    return try JSONParser.parse(String(line.dropLast()))
}

@Suite("ReplyEncoder")
struct ReplyEncoderTests {
    // MARK: - Success

    @Test("success without id or fields")
    func bareSuccess() {
        expectEqual(success(id: nil), #"{"ok":true}"# + "\n")
    }

    @Test("success with an id of each scalar kind", arguments: [
        (JSONValue.int(1), #"{"id":1,"ok":true}"#), (.int(-9), #"{"id":-9,"ok":true}"#),
        (.double(1.5), #"{"id":1.5,"ok":true}"#), (.string("abc"), #"{"id":"abc","ok":true}"#),
        (.string("q\"\\\n"), #"{"id":"q\"\\\n","ok":true}"#), (.bool(true), #"{"id":true,"ok":true}"#),
        (.bool(false), #"{"id":false,"ok":true}"#), (.null, #"{"id":null,"ok":true}"#),
        (.int(.min), #"{"id":-9223372036854775808,"ok":true}"#),
    ] as [(JSONValue, String)])
    func successWithID(id: JSONValue, expected: String) throws {
        let line = success(id: id)
        expectEqual(line, expected + "\n")
        expectEqual(try parsed(line)["id"].map { strictlyEqual($0, id) }, true)
    }

    @Test("a write's reply (one integer rev) has the same bytes with any id, and a non-integer rev is general")
    func writeReply() {
        #expect(success(id: nil, [("rev", .int(9_007_199_254_740_993))])
            == #"{"ok":true,"rev":9007199254740993}"# + "\n")
        #expect(success(id: .string("a\"b"), [("rev", .int(0))]) == #"{"id":"a\"b","ok":true,"rev":0}"# + "\n")
        expectEqual(success(id: .int(4), [("rev", .string("x"))]), #"{"id":4,"ok":true,"rev":"x"}"# + "\n")
        expectEqual(success(id: .int(5), [("rew", .int(1))]), #"{"id":5,"ok":true,"rew":1}"# + "\n")
    }

    @Test("success fields follow id and ok, in the order given")
    func successFields() throws {
        expectEqual(success(id: .int(2), [("rev", .int(1))]), #"{"id":2,"ok":true,"rev":1}"# + "\n")
        #expect(success(id: .int(3), [("rev", .int(1)), ("value", .string("London"))])
            == #"{"id":3,"ok":true,"rev":1,"value":"London"}"# + "\n")
        // Not sorted: the caller's order is kept.
        #expect(success(id: nil, [("value", .null), ("rev", .int(7)), ("exists", .bool(true))])
            == #"{"ok":true,"value":null,"rev":7,"exists":true}"# + "\n")
        let hello = success(id: .int(1), [
            ("connection", .int(1)), ("protocol", .int(1)), ("server", .string("kvod")), ("version", .string("0.1.0")),
        ])
        expectEqual(hello, #"{"id":1,"ok":true,"connection":1,"protocol":1,"server":"kvod","version":"0.1.0"}"# + "\n")
    }

    @Test("field values are full JSON (nested, escaped, sorted object keys)")
    func successFieldValues() throws {
        let value: JSONValue = .object(["name": .string("Ada \"the\" first"), "address": .object(["city": .string("Zürich")]),
                                        "tags": .array([.int(1), .double(2.5), .null])])
        let line = success(id: .string("r1"), [("value", value), ("objects", .array([.string("a"), .string("b")]))])
        #expect(line == #"{"id":"r1","ok":true,"value":{"address":{"city":"Zürich"},"name":"Ada \"the\" first","tags":[1,2.5,null]},"objects":["a","b"]}"# + "\n")
        let reply = try parsed(line)
        expectEqual(reply["value"].map { strictlyEqual($0, value) }, true)
        expectEqual(reply["ok"], .bool(true))
    }

    @Test("field names are escaped")
    func escapedFieldNames() throws {
        let line = success(id: nil, [("we\"ird\n", .int(1))])
        expectEqual(line, #"{"ok":true,"we\"ird\n":1}"# + "\n")
        expectEqual(try parsed(line)["we\"ird\n"], .int(1))
    }

    // MARK: - Failure

    @Test("failure with and without id")
    func failures() {
        #expect(failure(id: .int(6), .unknownOp, "unknown op 'frobnicate'")
            == #"{"id":6,"ok":false,"error":{"code":"unknown_op","message":"unknown op 'frobnicate'"}}"# + "\n")
        #expect(failure(id: nil, .tooManyConnections, "too many connections")
            == #"{"ok":false,"error":{"code":"too_many_connections","message":"too many connections"}}"# + "\n")
        #expect(failure(id: .string("x"), .typeMismatch, "'address.city' is a number, not an object")
            == #"{"id":"x","ok":false,"error":{"code":"type_mismatch","message":"'address.city' is a number, not an object"}}"# + "\n")
        #expect(failure(id: .null, .notFound, "")
            == #"{"id":null,"ok":false,"error":{"code":"not_found","message":""}}"# + "\n")
    }

    @Test("every error code is written as the protocol names it", arguments: [
        (KVOError.Code.badRequest, "bad_request"), (.unknownOp, "unknown_op"), (.notFound, "not_found"),
        (.exists, "exists"), (.typeMismatch, "type_mismatch"), (.tooLarge, "too_large"),
        (.tooManyConnections, "too_many_connections"),
    ] as [(KVOError.Code, String)])
    func codes(code: KVOError.Code, wire: String) throws {
        let line = failure(id: .int(1), code, "m")
        expectEqual(line, #"{"id":1,"ok":false,"error":{"code":"\#(wire)","message":"m"}}"# + "\n")
        let reply = try parsed(line)
        expectEqual(reply["error"]?["code"], .string(wire))
    }

    @Test("messages are escaped: quotes, backslashes, newlines, control characters, non-ASCII kept")
    func messageEscaping() throws {
        let message = "invalid JSON: unexpected character '\"' at byte 3\\ then\nnewline\r\t\u{1}\u{0} and é😀"
        let line = failure(id: .int(5), .badRequest, message)
        expectEqual(line, #"{"id":5,"ok":false,"error":{"code":"bad_request","message":"invalid JSON: unexpected character '\"' at byte 3\\ then\nnewline\r\t\u0001\u0000 and é😀"}}"# + "\n")
        let reply = try parsed(line)
        expectEqual(reply["ok"], .bool(false))
        expectEqual(reply["id"].map { strictlyEqual($0, .int(5)) }, true)
        expectEqual(reply["error"]?["message"], .string(message))
        expectEqual(reply["error"]?["code"], "bad_request")
        guard case let .object(error)? = reply["error"] else {
            Issue.record("no error object")
            return
        }
        expectEqual(Set(error.keys), ["code", "message"])
    }

    // MARK: - Buffers

    @Test("replies are appended after what the buffer already holds")
    func appends() {
        var buffer: [UInt8] = []
        ReplyEncoder.success(id: .int(1), fields: [("rev", .int(2))], into: &buffer)
        ReplyEncoder.failure(id: .int(2), error: KVOError(.exists, "exists"), into: &buffer)
        ReplyEncoder.success(id: nil, fields: [], into: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == """
            {"id":1,"ok":true,"rev":2}
            {"id":2,"ok":false,"error":{"code":"exists","message":"exists"}}
            {"ok":true}

            """)
    }
}
