import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

private func decode(_ line: String) -> RequestDecoder.Decoded {
    RequestDecoder.decode(Array(line.utf8))
}

/// The decoded request, or nil (with an issue recorded) when decoding failed.
private func request(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) -> Request? {
    switch decode(line).request {
    case let .success(request): return request
    case let .failure(error):
        Issue.record("\(line) failed: \(error.code.rawValue): \(error.message)", sourceLocation: sourceLocation)
        return nil
    }
}

/// The error, or nil when the line decoded.
private func failure(_ line: String) -> KVOError? {
    failure(decode(line))
}

private func failure(_ decoded: RequestDecoder.Decoded) -> KVOError? {
    if case let .failure(error) = decoded.request { return error }
    return nil
}

private func hasNoID(_ decoded: RequestDecoder.Decoded) -> Bool {
    if case .none = decoded.id { return true }
    return false
}

private func keyPath(_ text: String) -> KeyPath {
    try! KeyPath(text)
}

@Suite("RequestDecoder")
struct RequestDecoderTests {
    // MARK: - Every op

    @Test("hello")
    func hello() {
        expectEqual(request(#"{"op":"hello"}"#), .hello(client: nil))
        expectEqual(request(#"{"op":"hello","client":"docs"}"#), .hello(client: "docs"))
        expectEqual(failure(#"{"op":"hello","client":null}"#)?.code, .badRequest, "null is no way to leave a field out")
        expectEqual(request(#"{"op":"hello","client":""}"#), .hello(client: ""))
    }

    @Test("hello with events: full or compact; anything else is bad_request")
    func helloEvents() {
        expectEqual(request(#"{"op":"hello","events":"compact"}"#), .hello(client: nil, events: .compact))
        expectEqual(request(#"{"op":"hello","client":"c","events":"full"}"#), .hello(client: "c", events: .full))
        expectEqual(request(#"{"op":"hello","events":null}"#), .hello(client: nil, events: nil))
        for hostile in [#""Compact""#, #""""#, #""compact ""#, "1", "true", #"["compact"]"#, #"{"compact":1}"#] {
            expectEqual(failure(#"{"op":"hello","events":"# + hostile + "}")?.code, .badRequest, "\(hostile)")
        }
        let long = String(repeating: "x", count: 100_000)
        let message = failure(#"{"op":"hello","events":""# + long + #""}"#)?.message ?? ""
        #expect(message.utf8.count < 200 && message.contains("full") && message.contains("compact"))
    }

    @Test("create")
    func create() {
        expectEqual(request(#"{"op":"create","object":"person"}"#), .create(object: "person", values: [:]))
        expectEqual(failure(#"{"op":"create","object":"person","values":null}"#)?.code, .badRequest)
        expectEqual(request(#"{"op":"create","object":"p","values":{}}"#), .create(object: "p", values: [:]))
        let expected: [String: JSONValue] = ["name": .string("Ada"), "address": .object(["city": .string("London")]), "n": .int(1)]
        #expect(request(#"{"op":"create","object":"person","values":{"name":"Ada","address":{"city":"London"},"n":1}}"#)
            == .create(object: "person", values: expected))
    }

    @Test("delete")
    func delete() {
        expectEqual(request(#"{"op":"delete","object":"person"}"#), .delete(object: "person"))
    }

    @Test("get")
    func get() {
        expectEqual(request(#"{"op":"get","object":"person"}"#), .get(object: "person", keyPath: nil))
        #expect(failure(#"{"op":"get","object":"person","keyPath":null}"#)?.message
            == "'keyPath' must be a key path, not null (leave the field out instead)")
        let decoded = request(#"{"op":"get","object":"person","keyPath":"address.city"}"#)
        expectEqual(decoded, .get(object: "person", keyPath: keyPath("address.city")))
        if case let .get(_, path?) = decoded {
            expectEqual(path.components, ["address", "city"])
            expectEqual(path.string, "address.city")
        } else {
            Issue.record("no key path in \(String(describing: decoded))")
        }
    }

    @Test("integer fields read from their digits equal what the parser makes of them")
    func integerFields() {
        for text in ["0", "7", "-7", "10", "9223372036854775807", "-9223372036854775808", "-0", "1.0", "1e2",
                     "9223372036854775808", "-9223372036854775809", "00"] {
            let line = Array(#"{"op":"ping","id":\#(text)}"#.utf8)
            let decoded = RequestDecoder.decode(line)
            guard let parsed = try? JSONParser.parse(Array(text.utf8), wideIntegers: .refused) else {
                expectEqual(decoded.id, nil, "\(text)")
                continue
            }
            expectEqual(decoded.id.map { strictlyEqual($0, parsed) }, true, "\(text): \(String(describing: decoded.id))")
        }
    }

    @Test("every operation is found by its name's bytes as by its name; other names are not")
    func operationsByNameText() {
        for operation in ProtocolOperation.allCases {
            let name = Array(operation.declaration.name.utf8)
            #expect(name.withUnsafeBufferPointer { ProtocolOperation(nameText: $0) } == operation, "\(operation.declaration.name)")
            expectEqual(ProtocolOperation(named: operation.declaration.name), operation)
        }
        for unknown in ["", "s", "sett", "se", "SET", "unobservex", "observe\u{0}", "defineClas"] {
            expectEqual(Array(unknown.utf8).withUnsafeBufferPointer { ProtocolOperation(nameText: $0) }, nil, "\(unknown)")
        }
    }

    @Test("set, including to null, objects and arrays")
    func set() {
        #expect(request(#"{"op":"set","object":"person","keyPath":"address.city","value":"Paris"}"#)
            == .set(object: "person", keyPath: keyPath("address.city"), value: .decoded(.string("Paris"))))
        #expect(request(#"{"op":"set","object":"o","keyPath":"k","value":null}"#)
            == .set(object: "o", keyPath: keyPath("k"), value: .decoded(.null)))
        #expect(request(#"{"op":"set","object":"o","keyPath":"k","value":{"a":[1,2.5]}}"#)
            == .set(object: "o", keyPath: keyPath("k"), value: .decoded(.object(["a": .array([.int(1), .double(2.5)])]))))
        #expect(request(#"{"op":"set","object":"o","keyPath":"k","value":false}"#)
            == .set(object: "o", keyPath: keyPath("k"), value: .decoded(.bool(false))))
    }

    @Test("the set value keeps integer and double apart")
    func setValueKind() {
        for (json, expected) in [("3", JSONValue.int(3)), ("3.0", .double(3.0)), ("1e3", .double(1000))] {
            guard case let .set(_, _, value)? = request(#"{"op":"set","object":"o","keyPath":"k","value":\#(json)}"#) else {
                Issue.record("\(json) did not decode to a set")
                continue
            }
            #expect(strictlyEqual(value.value, expected), "\(json)")
        }
    }

    @Test("observe")
    func observe() {
        #expect(request(#"{"op":"observe","object":"person","keyPath":"address.city"}"#)
            == .observe(object: "person", keyPath: keyPath("address.city"), options: [.new], sinceRev: nil))
        #expect(request(#"{"op":"observe","object":"person","keyPath":"name","options":["old","prior"]}"#)
            == .observe(object: "person", keyPath: keyPath("name"), options: [.old, .prior], sinceRev: nil))
        #expect(request(#"{"op":"observe","object":"p","keyPath":"n","sinceRev":42}"#)
            == .observe(object: "p", keyPath: keyPath("n"), options: [.new], sinceRev: 42))
        #expect(request(#"{"op":"observe","object":"p","keyPath":"n","sinceRev":0}"#)
            == .observe(object: "p", keyPath: keyPath("n"), options: [.new], sinceRev: 0))
        for bad in [#""7""#, "-1", "1.5", "[1]"] {
            expectEqual(failure(#"{"op":"observe","object":"p","keyPath":"n","sinceRev":\#(bad)}"#)?.code, .badRequest, "sinceRev \(bad)")
        }
    }

    @Test("unobserve")
    func unobserve() {
        expectEqual(request(#"{"op":"unobserve","sub":7}"#), .unobserve(subscription: 7))
        expectEqual(request(#"{"op":"unobserve","sub":0}"#), .unobserve(subscription: 0))
        expectEqual(request(#"{"op":"unobserve","sub":9223372036854775807}"#), .unobserve(subscription: .max))
    }

    @Test("list, info, ping")
    func listInfoPing() {
        expectEqual(request(#"{"op":"list"}"#), .list(limit: nil, after: nil))
        expectEqual(request(#"{"op":"list","limit":10,"after":"m"}"#), .list(limit: 10, after: "m"))
        expectEqual(failure(#"{"op":"list","limit":0}"#)?.code, .badRequest)
        expectEqual(failure(#"{"op":"list","limit":"5"}"#)?.code, .badRequest)
        expectEqual(failure(#"{"op":"list","after":5}"#)?.code, .badRequest)
        expectEqual(request(#"{"op":"info","object":"person"}"#), .info(object: "person"))
        expectEqual(request(#"{"op":"ping"}"#), .ping)
    }

    @Test("unknown fields are refused, naming the first, with a suggestion when one is close")
    func unknownFieldsRefused() {
        expectEqual(failure(#"{"op":"ping","extra":[1,{"x":null}],"object":5}"#)?.message, "unknown field 'extra': ping takes op, id")
        expectEqual(failure(#"{"op":"list","keyPath":".."}"#)?.message, "unknown field 'keyPath': list takes op, id, limit, after, atLeastRev")
        expectEqual(failure(#"{"op":"delete","object":"o","values":"nope","keyPath":""}"#)?.message.hasPrefix("unknown field 'values'"), true)
        expectEqual(failure(#"{"future":true,"op":"get","object":"o"}"#)?.message.hasPrefix("unknown field 'future'"), true)
        expectEqual(failure(#"{"op":"get","objct":"o"}"#)?.message, "unknown field 'objct' (did you mean 'object'?)")
        expectEqual(failure(#"{"op":"get","object":"o","KEYPATH":"n"}"#)?.message, "unknown field 'KEYPATH' (did you mean 'keyPath'?)")
        // A long name, an escaped one, one of more than eight bytes: the same rule.
        expectEqual(failure(#"{"op":"get","object":"o","changedRev":1}"#)?.message.hasPrefix("unknown field 'changedRev'"), true)
        expectEqual(request(#"{"op":"expire","object":"o","changedRev":1}"#), .expire(object: "o", changedRev: 1))
        let long = String(repeating: "z", count: 10_000)
        #expect((failure(#"{"op":"ping",""# + long + #"":1}"#)?.message.utf8.count ?? .max) < 300)
    }

    @Test("surrounding white space and escaped field values")
    func whitespaceAndEscapes() {
        expectEqual(request(" { \"op\" : \"delete\" , \"object\" : \"a\\\"b\" } "), .delete(object: "a\"b"))
        expectEqual(request(#"{"op":"\u0070ing"}"#), .ping)
        #expect(request(#"{"op":"get","object":"caf\u00e9","keyPath":"x.\u00e9"}"#)
            == .get(object: "café", keyPath: keyPath("x.é")))
    }

    // MARK: - id

    @Test("a scalar id is echoed, on success and on failure", arguments: [
        (#""abc""#, JSONValue.string("abc")), ("1", .int(1)), ("-5", .int(-5)), ("1.5", .double(1.5)),
        ("true", .bool(true)), ("false", .bool(false)), ("null", .null), (#""""#, .string("")),
        ("9223372036854775807", .int(.max)), ("9.223372036854776e18", .double(9_223_372_036_854_775_808.0)),
    ] as [(String, JSONValue)])
    func idEcho(idText: String, expected: JSONValue) {
        let success = decode(#"{"op":"ping","id":\#(idText)}"#)
        expectEqual(success.id.map { strictlyEqual($0, expected) }, true, "\(String(describing: success.id))")
        expectEqual(failure(success), nil)

        let unknown = decode(#"{"id":\#(idText),"op":"frobnicate"}"#)
        expectEqual(unknown.id.map { strictlyEqual($0, expected) }, true)
        expectEqual(failure(unknown)?.code, .unknownOp)

        let bad = decode(#"{"id":\#(idText),"op":"get"}"#)
        expectEqual(bad.id.map { strictlyEqual($0, expected) }, true)
        expectEqual(failure(bad)?.code, .badRequest)

        let missingOp = decode(#"{"id":\#(idText)}"#)
        expectEqual(missingOp.id.map { strictlyEqual($0, expected) }, true)
        expectEqual(failure(missingOp)?.code, .badRequest)
    }

    @Test("without id, no id; a null id is an id")
    func absentID() {
        let decoded = decode(#"{"op":"ping"}"#)
        #expect(hasNoID(decoded))
        expectEqual(failure(decoded), nil)
        #expect(!hasNoID(decode(#"{"op":"ping","id":null}"#)))
    }

    @Test("a non-scalar id is bad_request with no id", arguments: [
        #"{"op":"ping","id":[1]}"#, #"{"op":"ping","id":{"a":1}}"#, #"{"op":"ping","id":[]}"#, #"{"op":"ping","id":{}}"#,
        #"{"op":"frobnicate","id":[1]}"#,
    ])
    func nonScalarID(line: String) {
        let decoded = decode(line)
        #expect(hasNoID(decoded))
        expectEqual(failure(decoded)?.code, .badRequest)
    }

    // MARK: - Lines that are not request objects

    @Test("not JSON, or not an object: bad_request with no id", arguments: [
        "", "   ", "not json", #"{"op":"ping""#, #"{"op":"ping","id":1,}"#, #"{"op":"ping"} {"op":"ping"}"#,
        "[]", #"["op","ping"]"#, #""ping""#, "null", "1", "true", #"{"op":"ping","id":1}x"#,
    ])
    func notARequestObject(line: String) {
        let decoded = decode(line)
        #expect(hasNoID(decoded))
        expectEqual(failure(decoded)?.code, .badRequest, "\(line)")
    }

    @Test("invalid UTF-8 is bad_request with no id and says so")
    func invalidUTF8() {
        let line = Array(#"{"op":"get","id":1,"object":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)
        let decoded = RequestDecoder.decode(line)
        #expect(hasNoID(decoded))
        expectEqual(failure(decoded)?.code, .badRequest)
        expectEqual(failure(decoded)?.message.hasPrefix("invalid UTF-8"), true)
        // A JSON error reads differently.
        expectEqual(failure("{")?.message.hasPrefix("invalid JSON"), true)
    }

    @Test("the buffer entry point decodes exactly the bytes it is given")
    func bufferEntryPoint() {
        let bytes = Array(#"{"op":"ping","id":3}{"op":"list"}"#.utf8)
        let decoded = bytes.withUnsafeBufferPointer { buffer in
            RequestDecoder.decode(UnsafeBufferPointer(rebasing: buffer[0..<20]))
        }
        expectEqual(failure(decoded), nil)
        expectEqual(decoded.id, .int(3))
        if case let .success(request) = decoded.request { #expect(request == .ping) }
    }

    // MARK: - op

    @Test("missing op or an op that is not a string is bad_request", arguments: [
        #"{}"#, #"{"id":1}"#, #"{"op":null}"#, #"{"op":1}"#, #"{"op":true}"#, #"{"op":["ping"]}"#, #"{"op":{"name":"ping"}}"#,
        #"{"Op":"ping"}"#,
    ])
    func opNotAString(line: String) {
        expectEqual(failure(line)?.code, .badRequest, "\(line)")
    }

    @Test("an unknown op is unknown_op, naming it", arguments: ["frobnicate", "PING", "Ping", "", " ping", "ping ", "get.set", "observe\u{0}"])
    func unknownOp(op: String) {
        var line: [UInt8] = []
        JSONWriter.write(.object(["op": .string(op), "id": .int(6)]), into: &line)
        let decoded = RequestDecoder.decode(line)
        let error = failure(decoded)
        expectEqual(error?.code, .unknownOp)
        expectEqual(error?.message, "unknown op '\(op)'")
        expectEqual(decoded.id, .int(6))
    }

    // MARK: - Missing and mistyped fields, op by op

    @Test("missing or mistyped fields are bad_request", arguments: [
        // hello
        #"{"op":"hello","client":1}"#, #"{"op":"hello","client":["x"]}"#, #"{"op":"hello","client":true}"#,
        // create
        #"{"op":"create"}"#, #"{"op":"create","object":null}"#, #"{"op":"create","object":1}"#,
        #"{"op":"create","object":["a"]}"#, #"{"op":"create","values":{}}"#,
        #"{"op":"create","object":"o","values":[]}"#, #"{"op":"create","object":"o","values":"x"}"#,
        #"{"op":"create","object":"o","values":1}"#, #"{"op":"create","object":"o","values":true}"#,
        // delete
        #"{"op":"delete"}"#, #"{"op":"delete","object":5}"#, #"{"op":"delete","object":null}"#,
        #"{"op":"delete","object":{}}"#,
        // get
        #"{"op":"get"}"#, #"{"op":"get","object":1}"#, #"{"op":"get","keyPath":"a"}"#,
        #"{"op":"get","object":"o","keyPath":1}"#, #"{"op":"get","object":"o","keyPath":["a"]}"#,
        #"{"op":"get","object":"o","keyPath":""}"#,
        // set
        #"{"op":"set","object":"o","keyPath":"k"}"#, #"{"op":"set","keyPath":"k","value":1}"#,
        #"{"op":"set","object":"o","value":1}"#, #"{"op":"set","object":"o","keyPath":null,"value":1}"#,
        #"{"op":"set","object":"o","keyPath":5,"value":1}"#, #"{"op":"set","object":7,"keyPath":"k","value":1}"#,
        // observe
        #"{"op":"observe","object":"o"}"#, #"{"op":"observe","keyPath":"k"}"#,
        #"{"op":"observe","object":"o","keyPath":null}"#, #"{"op":"observe","object":"o","keyPath":1}"#,
        #"{"op":"observe","object":1,"keyPath":"k"}"#,
        // unobserve
        #"{"op":"unobserve"}"#, #"{"op":"unobserve","sub":null}"#, #"{"op":"unobserve","sub":"7"}"#,
        #"{"op":"unobserve","sub":1.5}"#, #"{"op":"unobserve","sub":-0.5}"#, #"{"op":"unobserve","sub":true}"#,
        #"{"op":"unobserve","sub":[7]}"#, #"{"op":"unobserve","sub":9223372036854775808}"#,
        // info
        #"{"op":"info"}"#, #"{"op":"info","object":2}"#, #"{"op":"info","object":null}"#,
    ])
    func badFields(line: String) {
        let decoded = decode(line)
        expectEqual(failure(decoded)?.code, .badRequest, "\(line)")
    }

    @Test("error messages name the field")
    func messagesNameTheField() {
        expectEqual(failure(#"{"op":"delete"}"#)?.message, "missing 'object'")
        expectEqual(failure(#"{"op":"delete","object":5}"#)?.message, "'object' must be a string, not number")
        expectEqual(failure(#"{"op":"set","object":"o","keyPath":"k"}"#)?.message, "missing 'value'")
        expectEqual(failure(#"{"op":"unobserve"}"#)?.message, "missing 'sub'")
        expectEqual(failure(#"{"op":"unobserve","sub":"1"}"#)?.message.contains("'sub'"), true)
        expectEqual(failure(#"{"op":"create","object":"o","values":[]}"#)?.message.contains("'values'"), true)
        expectEqual(failure(#"{"op":"hello","client":1}"#)?.message.contains("'client'"), true)
        expectEqual(failure(#"{"id":1}"#)?.message, "missing 'op'")
    }

    // MARK: - Options

    @Test("options: omitted is [new]; null is refused; each name; all together; duplicates")
    func options() {
        func decodeOptions(_ json: String) -> ObservationOptions? {
            guard case let .observe(_, _, options, _)? = request(#"{"op":"observe","object":"o","keyPath":"k"\#(json)}"#)
            else { return nil }
            return options
        }
        expectEqual(decodeOptions(""), [.new])
        expectEqual(decodeOptions(""), .default)
        expectEqual(failure(#"{"op":"observe","object":"o","keyPath":"k","options":null}"#)?.code, .badRequest, "null is no way to leave a field out")
        expectEqual(decodeOptions(#","options":[]"#), [])
        expectEqual(decodeOptions(#","options":["new"]"#), [.new])
        expectEqual(decodeOptions(#","options":["old"]"#), [.old])
        expectEqual(decodeOptions(#","options":["initial"]"#), [.initial])
        expectEqual(decodeOptions(#","options":["prior"]"#), [.prior])
        expectEqual(decodeOptions(#","options":["prior","initial","old","new"]"#), [.new, .old, .initial, .prior])
        expectEqual(decodeOptions(#","options":["old","old"]"#), [.old])
    }

    @Test("options: unknown names, non-strings or not an array are bad_request", arguments: [
        #"["newest"]"#, #"["New"]"#, #"["new","bogus"]"#, #"[""]"#, #"["new "]"#, #"["settings"]"#,
        #"[1]"#, #"["new",null]"#, #"[["new"]]"#, #"[true]"#,
        #""new""#, "1", "true", #"{"new":true}"#, "{}",
    ])
    func badOptions(json: String) {
        let error = failure(#"{"op":"observe","object":"o","keyPath":"k","options":\#(json)}"#)
        expectEqual(error?.code, .badRequest, "\(json)")
    }

    @Test("an unknown option's message names it")
    func unknownOptionMessage() {
        let error = failure(#"{"op":"observe","object":"o","keyPath":"k","options":["new","sideways"]}"#)
        expectEqual(error?.message.contains("'sideways'"), true)
    }

    // MARK: - Key paths

    static let badKeyPaths: [String] = [
        "", ".", "..", "a..b", ".a", "a.", ".a.", "a.b.", "a..", String(repeating: "a", count: 1025),
        Array(repeating: "k", count: 65).joined(separator: "."),
        String(repeating: "é", count: 513),  // 513 characters but 1026 bytes
    ]

    @Test("malformed key paths are bad_request in get, set and observe", arguments: badKeyPaths)
    func badKeyPath(path: String) {
        var encodedPath: [UInt8] = []
        JSONWriter.writeString(path, into: &encodedPath)
        let pathJSON = String(decoding: encodedPath, as: UTF8.self)
        for line in [
            #"{"op":"get","object":"o","keyPath":\#(pathJSON)}"#,
            #"{"op":"set","object":"o","keyPath":\#(pathJSON),"value":1}"#,
            #"{"op":"observe","object":"o","keyPath":\#(pathJSON)}"#,
        ] {
            expectEqual(failure(line)?.code, .badRequest, "\(line.prefix(80))")
        }
        #expect(throws: KVOError.self) { try KeyPath(path) }
    }

    @Test("key paths at the limits are accepted")
    func keyPathLimits() throws {
        let longest = String(repeating: "a", count: KeyPath.maximumLength)
        expectEqual(request(#"{"op":"get","object":"o","keyPath":"\#(longest)"}"#), .get(object: "o", keyPath: keyPath(longest)))
        let longestMultibyte = String(repeating: "é", count: KeyPath.maximumLength / 2)
        expectEqual(try KeyPath(longestMultibyte).string, longestMultibyte)

        let deepest = Array(repeating: "k", count: KeyPath.maximumDepth).joined(separator: ".")
        let decoded = request(#"{"op":"observe","object":"o","keyPath":"\#(deepest)"}"#)
        if case let .observe(_, path, _, _)? = decoded {
            expectEqual(path.components.count, KeyPath.maximumDepth)
        } else {
            Issue.record("not an observe: \(String(describing: decoded))")
        }
        expectEqual(try KeyPath("a").components, ["a"])
        expectEqual(try KeyPath("a.b.c").components, ["a", "b", "c"])
        expectEqual(try KeyPath(" . ").components, [" ", " "])
        expectEqual(try KeyPath("a-b.c_d.é.😀").components, ["a-b", "c_d", "é", "😀"])
    }

    @Test("limits are what the protocol documents")
    func documentedLimits() {
        expectEqual(KeyPath.maximumLength, 1024)
        expectEqual(KeyPath.maximumDepth, 64)
        expectEqual(RequestDecoder.maximumObjectIDLength, 1024)
    }

    // MARK: - Object ids

    @Test("object ids: empty or over 1024 bytes is bad_request, in every op that takes one", arguments: [
        "", String(repeating: "x", count: 1025), String(repeating: "é", count: 513), String(repeating: "😀", count: 257),
    ])
    func badObjectID(object: String) {
        for op in ["create", "delete", "get", "info"] {
            var line: [UInt8] = []
            JSONWriter.write(.object(["op": .string(op), "object": .string(object)]), into: &line)
            expectEqual(failure(RequestDecoder.decode(line))?.code, .badRequest, "\(op)")
        }
        let extras: [[String: JSONValue]] = [["keyPath": "k", "value": 1], ["keyPath": "k"]]
        for extra in extras {
            for op in ["set", "observe"] {
                var fields = extra
                fields["op"] = .string(op)
                fields["object"] = .string(object)
                var line: [UInt8] = []
                JSONWriter.write(.object(fields), into: &line)
                expectEqual(failure(RequestDecoder.decode(line))?.code, .badRequest, "\(op)")
            }
        }
    }

    @Test("object ids of exactly 1024 bytes are accepted", arguments: [
        String(repeating: "x", count: 1024), String(repeating: "é", count: 512), String(repeating: "😀", count: 256),
    ])
    func longestObjectID(object: String) {
        var line: [UInt8] = []
        JSONWriter.write(.object(["op": "delete", "object": .string(object)]), into: &line)
        let decoded = RequestDecoder.decode(line)
        if case let .success(request) = decoded.request {
            expectEqual(request, .delete(object: object))
        } else {
            Issue.record("rejected: \(String(describing: failure(decoded)))")
        }
    }

    @Test("object ids may contain dots, spaces and escapes")
    func unusualObjectIDs() {
        expectEqual(request(#"{"op":"delete","object":"a.b c\n\u0000"}"#), .delete(object: "a.b c\n\u{0}"))
        expectEqual(request(#"{"op":"delete","object":" "}"#), .delete(object: " "))
    }

    @Test("classes: defineClass, classes, create with a class")
    func classRequests() {
        expectEqual(request(#"{"op":"defineClass","class":{"name":"C"}}"#), .defineClass(definition: ["name": "C"]))
        expectEqual(request(#"{"op":"classes"}"#), .classes)
        #expect(request(#"{"op":"create","object":"c","class":"C","values":{"a":1}}"#)
            == .create(object: "c", values: ["a": 1], className: "C"))
        expectEqual(failure(#"{"op":"defineClass"}"#)?.message, "missing 'class'")
        expectEqual(failure(#"{"op":"create","object":"c","class":3}"#)?.code, .badRequest)
    }

    @Test("bindings: bind, combineLatest, unbind, bindings")
    func bindingRequests() {
        let a = BindingEndpoint(object: "a", keyPath: try! KeyPath("x"))
        let b = BindingEndpoint(object: "b", keyPath: try! KeyPath("y.z"))
        #expect(request(#"{"op":"bind","from":{"object":"a","keyPath":"x"},"to":{"object":"b","keyPath":"y.z"}}"#)
            == .bind(BindingSpec(kind: .bind, sources: [a], target: b, filter: nil, transform: nil), now: false))
        #expect(request(#"{"op":"bind","from":{"object":"a","keyPath":"x"},"to":{"object":"b","keyPath":"y.z"},"filter":"$value > 1","convert":"$value * 2","now":true}"#)
            == .bind(BindingSpec(kind: .bind, sources: [a], target: b, filter: "$value > 1", transform: "$value * 2"), now: true))
        #expect(request(#"{"op":"combineLatest","sources":[{"object":"a","keyPath":"x"},{"object":"b","keyPath":"y.z"}],"to":{"object":"a","keyPath":"x"},"reduce":"$0 + $1"}"#)
            == .bind(BindingSpec(kind: .combineLatest, sources: [a, b], target: a, filter: nil, transform: "$0 + $1"), now: false))
        expectEqual(request(#"{"op":"unbind","binding":3}"#), .unbind(binding: 3))
        expectEqual(request(#"{"op":"bindings"}"#), .bindings)
        for (line, message) in [
            (#"{"op":"bind","to":{"object":"b","keyPath":"y"}}"#, "missing 'from'"),
            (#"{"op":"bind","from":{"object":"a","keyPath":"x"}}"#, "missing 'to'"),
            (#"{"op":"bind","from":{"object":"","keyPath":"x"},"to":{"object":"b","keyPath":"y"}}"#, "'from.object' must be a non-empty string"),
            (#"{"op":"bind","from":"a.x","to":{"object":"b","keyPath":"y"}}"#, "'from' must be an object with 'object' and 'keyPath', not string"),
            (#"{"op":"bind","from":{"object":"a","keyPath":"x"},"to":{"object":"b","keyPath":"y"},"convert":3}"#, "'convert' must be an expression (a string), not number"),
            (#"{"op":"bind","from":{"object":"a","keyPath":"x"},"to":{"object":"b","keyPath":"y"},"now":"yes"}"#, "'now' must be true or false, not string"),
            (#"{"op":"combineLatest","sources":[],"to":{"object":"b","keyPath":"y"},"reduce":"$0"}"#, #"'sources' must be a non-empty array of {"object", "keyPath"}"#),
            (#"{"op":"combineLatest","sources":[{"object":"a","keyPath":"x"}],"to":{"object":"b","keyPath":"y"}}"#, "missing 'reduce'"),
            (#"{"op":"unbind","binding":0}"#, "'binding' must be a positive integer"),
            (#"{"op":"unbind"}"#, "missing 'binding'"),
        ] {
            expectEqual(failure(line)?.message, message, "\(line)")
        }
        expectEqual(failure(#"{"op":"bind","from":{"object":"a","keyPath":"x.."},"to":{"object":"b","keyPath":"y"}}"#)?.code, .badRequest)
    }
}
