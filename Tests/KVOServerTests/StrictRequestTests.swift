import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Strict requests (issue 41): every row of the operations table walked through the in-process server
/// (`EmbeddedConnection`). Each field a row declares is accepted; a misspelling of each is `bad_request` naming it
/// with the field as a suggestion; a value of another type and a `null` where the row takes none are `bad_request`;
/// and the state digest is unchanged by all the refusals. A new row or field is walked without a line added here.
@Suite struct StrictRequestTests {
    private func makeServer() throws -> Server {
        var configuration = ServerConfiguration()
        configuration.isEmbedded = true
        configuration.listensForPlaintext = false
        configuration.firstRequestTimeout = 0
        return try Server(configuration: configuration)
    }

    /// Sends `request` on a connection of its own (a probe may subscribe or begin a session) and returns the reply.
    private func call(_ server: Server, _ request: String) throws -> JSONValue {
        let client = server.makeEmbeddedConnection()
        defer {
            client.close()
            server.step()
        }
        client.send(line: request)
        let lines = client.takeLines()
        try #require(!lines.isEmpty, "a reply to \(request)")
        return try JSONParser.parse(lines[0])
    }

    /// The error object a request line gets: from the server, or, for the rows the server answers with one refusal
    /// whatever was wrong (`auth`) or refuses whole in open mode (user management), from the one decoder it uses.
    private func error(_ server: Server, _ operation: ProtocolOperation, _ line: String) throws -> JSONValue? {
        switch operation.declaration.route {
        case .authentication, .administration:
            guard case let .failure(error) = RequestDecoder.decode(Array(line.utf8)).request else { return nil }
            var members: [String: JSONValue] = ["code": .string(error.code.rawValue), "message": .string(error.message)]
            for (key, value) in error.details { members[key] = value }
            return .object(members)
        case .engine, .presence, .serverState, .storage:
            return try call(server, line)["error"]
        }
    }

    private func digest(_ server: Server) throws -> JSONValue? {
        try call(server, #"{"op":"digest"}"#)["digest"]
    }

    /// The row's example with `field` set to `text` (a JSON text), as a line.
    private func line(_ operation: ProtocolOperation, setting name: String, to text: String) throws -> String {
        guard case var .object(members) = try JSONParser.parse(operation.declaration.example) else {
            Issue.record("\(operation.name)'s example is not an object")
            return ""
        }
        members[name] = try JSONParser.parse(text)
        return String(decoding: JSONWriter.bytes(.object(members)), as: UTF8.self)
    }

    /// A value of the field's type (accepted as a type; the request may still fail for another reason).
    private func sample(_ type: FieldType) -> String {
        switch type {
        case .string: #""x""#
        case .objectID: #""o""#
        case .keyPath: #""n""#
        case .pattern: #""o*""#
        case .expression: #""true""#
        case .integer, .number, .seconds, .any, .scalar: "1"
        case .boolean, .onlyTrue: "true"
        case .object: "{}"
        case .array: "[]"
        }
    }

    /// A misspelling of `name` that `NameSuggestion` maps back to it: another case, or the last letter doubled.
    private func misspelling(of name: String) -> String {
        name.lowercased() != name ? name.lowercased() : name + String(name.last!)
    }

    @Test("every row: each declared field accepted, a misspelling of each refused naming it, nothing applied")
    func everyRowRefusesUnknownFields() throws {
        let server = try makeServer()
        defer { _ = server.stopEmbedded() }
        expectEqual(try call(server, #"{"op":"create","object":"o","values":{"n":1,"list":[1,2]}}"#)["ok"], true)
        // User management last: an accepted `userAdd` probe adds the first user and ends open mode, after which the
        // rows walked would be refused before login.
        let administration = ProtocolOperation.allCases.filter { $0.declaration.route == .administration }
        for operation in ProtocolOperation.allCases.filter({ $0.declaration.route != .administration }) + administration {
            let declaration = operation.declaration
            expectEqual(Set(declaration.fields.map(\.field)).count, declaration.fields.count, "\(operation.name) declares a field twice")
            // Accepted: no declared field is ever an unknown one.
            for declared in declaration.fields where declared.field != .op {
                let reply = try call(server, try line(operation, setting: declared.field.name, to: sample(declared.type)))
                let message = reply["error"]?["message"]?.stringValue ?? ""
                #expect(!message.contains("unknown field"), "\(operation.name).\(declared.field.name): \(reply)")
            }
            // Refused: a misspelling, another type, a null where none is taken; the state as it was.
            let before = try digest(server)
            for declared in declaration.fields where declared.field != .op {
                let name = declared.field.name
                let wrongName = misspelling(of: name)
                let misspelt = try error(server, operation, try line(operation, setting: wrongName, to: sample(declared.type)))
                expectEqual(misspelt?["code"], "bad_request", "\(operation.name) with '\(wrongName)': \(String(describing: misspelt))")
                #expect(misspelt?["message"]?.stringValue?.hasPrefix("unknown field '\(wrongName)' (did you mean '\(name)'?)") == true,
                        "\(operation.name) with '\(wrongName)': \(String(describing: misspelt))")
                expectEqual(misspelt?["field"], .string(wrongName))
                if let mismatch = declared.type.mismatch {
                    let refused = try error(server, operation, try line(operation, setting: name, to: mismatch))
                    expectEqual(refused?["code"], "bad_request", "\(operation.name) with \(name): \(mismatch): \(String(describing: refused))")
                }
                if !declared.acceptsNull {
                    let refused = try error(server, operation, try line(operation, setting: name, to: "null"))
                    expectEqual(refused?["code"], "bad_request", "\(operation.name) with \(name): null: \(String(describing: refused))")
                }
            }
            expectEqual(try digest(server), before, "\(operation.name): a refused request changed the state")
        }
    }

    @Test("the issue's cases: a misspelt condition, a field of no row, a misspelt option list, where: null, options: \"new\"")
    func theIssuesCases() throws {
        let server = try makeServer()
        defer { _ = server.stopEmbedded() }
        expectEqual(try call(server, #"{"op":"create","object":"o","values":{"n":1}}"#)["ok"], true)
        let before = try digest(server)
        let misspelt = try call(server, #"{"op":"set","id":1,"object":"o","keyPath":"n","value":2,"ifequals":{"keyPath":"n","value":99}}"#)
        expectEqual(misspelt["id"], 1)
        expectEqual(misspelt["error"]?["code"], "bad_request")
        expectEqual(misspelt["error"]?["message"], "unknown field 'ifequals' (did you mean 'ifEquals'?)")
        let amount = try call(server, #"{"op":"increment","object":"o","keyPath":"n","amount":10}"#)
        #expect(amount["error"]?["message"]?.stringValue?.hasPrefix("unknown field 'amount': increment takes op, id, object, keyPath, by, ifExists") == true,
                "\(amount)")
        let option = try call(server, #"{"op":"observe","object":"o","keyPath":"n","option":["initial"]}"#)
        expectEqual(option["error"]?["message"], "unknown field 'option' (did you mean 'options'?)")
        let whereNull = try call(server, #"{"op":"observe","pattern":"o*","where":null}"#)
        expectEqual(whereNull["error"]?["code"], "bad_request")
        expectEqual(whereNull["error"]?["message"], "'where' must be an expression, not null (leave the field out instead)")
        let optionsText = try call(server, #"{"op":"observe","object":"o","keyPath":"n","options":"new"}"#)
        expectEqual(optionsText["error"]?["code"], "bad_request")
        // An escaped name is the same name: accepted as the field it spells.
        expectEqual(try call(server, #"{"op":"get","\u006fbject":"o","keyPath":"n"}"#)["value"], 1)
        // A field of another row keeps its message naming the rows that take it.
        let ttl = try call(server, #"{"op":"increment","object":"o","keyPath":"n","ttl":5}"#)
        expectEqual(ttl["error"]?["message"], "'ttl' goes with create and set only")
        // An extra member inside a condition's object, and in a binding's endpoint.
        let inside = try call(server, #"{"op":"set","object":"o","keyPath":"n","value":2,"ifEquals":{"keyPath":"n","value":1,"vaule":1}}"#)
        expectEqual(inside["error"]?["message"], "unknown field 'vaule' in 'ifEquals' (did you mean 'value'?)")
        let endpoint = try call(server, #"{"op":"bind","from":{"object":"o","keyPath":"n","keypath":"m"},"to":{"object":"o","keyPath":"m"}}"#)
        expectEqual(endpoint["error"]?["message"], "unknown field 'keypath' in 'from' (did you mean 'keyPath'?)")
        expectEqual(try digest(server), before)
        // `hello`'s `events: null` is "absent" (documented): the encoding stays as it is.
        expectEqual(try call(server, #"{"op":"hello","events":null}"#)["events"], "full")
        expectEqual(try call(server, #"{"op":"set","object":"o","keyPath":"n","value":null}"#)["ok"], true, "null is a value")
    }

    @Test("hello announces the features the table declares")
    func helloFeatures() throws {
        let server = try makeServer()
        defer { _ = server.stopEmbedded() }
        let hello = try call(server, #"{"op":"hello"}"#)
        let features = hello["features"]?.arrayValue?.compactMap(\.stringValue) ?? []
        #expect(features == ["atLeastRev", "compactEvents", "conditions", "ephemeral", "liveQueries", "sessions", "signals", "sinceRev", "ttl"])
        #expect(ProtocolFeature.allCases.allSatisfy { $0.isDeclared })
    }

    @Test("NameSuggestion: another case first, then a small edit distance, nothing when far")
    func suggestions() {
        expectEqual(NameSuggestion.closest(to: "ifequals", among: ["ifExists", "ifEquals"]), "ifEquals")
        expectEqual(NameSuggestion.closest(to: "objet", among: ["object", "objects"]), "object")
        expectEqual(NameSuggestion.closest(to: "amount", among: ["object", "keyPath", "by"]), nil)
        expectEqual(NameSuggestion.closest(to: "tp", among: ["to", "op"]), "to")
        expectEqual(NameSuggestion.closest(to: "KVOD_MAX_CONECTIONS", among: ["KVOD_MAX_CONNECTIONS", "KVOD_MAX_LINE"]), "KVOD_MAX_CONNECTIONS")
    }
}
