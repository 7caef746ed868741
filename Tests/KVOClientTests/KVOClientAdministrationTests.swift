import Foundation
import KVOClient
import Testing

@testable import KVOTestSupport

/// Issue 29, item 6: typed results for bindings, class definitions and user administration, against the real kvod.
@Suite struct KVOClientAdministrationTests {
    /// The shape a caller gives `defineClass`, decoded back by `classDefinitions(as:)`.
    struct ClassDefinition: Codable, Sendable, Equatable {
        struct Property: Codable, Sendable, Equatable {
            var type: String
            var maxLength: Int?
        }

        var name: String
        var properties: [String: Property]
    }

    @Test("bindingDefinitions and classDefinitions decode what bind, combineLatest and defineClass made")
    func bindingsAndClasses() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let tag = ClassDefinition(name: "Tag", properties: ["label": .init(type: "string", maxLength: 5)])
        expectEqual(try await kvod.defineClass(tag), "Tag")
        expectEqual(try await kvod.classDefinitions(as: ClassDefinition.self), [tag])
        try await kvod.create("a", values: ["x": 1] as JSONValue)
        try await kvod.create("b", values: JSONValue.object([:]))
        let bound = try await kvod.bind(from: .init("x", of: "a"), to: .init("y", of: "b"), convert: "$value * 2", now: true)
        let combined = try await kvod.combineLatest([.init("x", of: "a"), .init("y", of: "b")], to: .init("sum", of: "b"),
                                                    reduce: "$0 + $1", filter: "$0 > 0", now: true)
        let definitions = try await kvod.bindingDefinitions()
        expectEqual(definitions.map(\.id), [bound.binding, combined.binding])
        #expect(definitions.first?.kind == .bind && definitions.first?.from == .init("x", of: "a")
                && definitions.first?.to == .init("y", of: "b") && definitions.first?.convert == "$value * 2"
                && definitions.first?.sources == [] && definitions.first?.creator == nil)
        #expect(definitions.last?.kind == .combineLatest && definitions.last?.from == nil
                && definitions.last?.sources == [.init("x", of: "a"), .init("y", of: "b")]
                && definitions.last?.reduce == "$0 + $1" && definitions.last?.filter == "$0 > 0")
    }

    @Test("users: add, list, grant, revoke, tokens, password and removal through typed calls; the token logs in")
    func users() async throws {
        let scratch = try TemporaryDirectory("client-admin")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("root", password: "root password", usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        var configuration = server.clientConfiguration()
        configuration.credentials = .password(user: "root", password: "root password")
        let admin = try await KVOClient.connect(to: configuration)

        try await admin.addUser("feed", password: "feed password",
                                rules: [.init(objects: "sensor-*", allow: [.read])], hashCost: .minimal)
        var feed = try await admin.users().first { $0.name == "feed" }
        #expect(feed?.rules == [.init(objects: "sensor-*", allow: [.read])] && feed?.tokens == [])
        #expect(try await admin.grant([.init(objects: "sensor-*", allow: [.write])], to: "feed")
                == [.init(objects: "sensor-*", allow: [.read, .write])])
        let token = try await admin.createToken(for: "feed")
        #expect(token.user == "feed" && token.token.hasPrefix("kvod_\(token.id)_"))
        feed = try await admin.users().first { $0.name == "feed" }
        expectEqual(feed?.tokens, [token.id])

        configuration.credentials = .token(token.token)
        let service = try await KVOClient.connect(to: configuration)
        try await service.create("sensor-1", values: ["t": 20] as JSONValue)
        service.close()

        #expect(try await admin.revoke([.init(objects: "sensor-*", allow: [.write])], from: "feed")
                == [.init(objects: "sensor-*", allow: [.read])])
        try await admin.revokeToken(token.id, of: "feed")
        expectEqual(try await admin.users().first { $0.name == "feed" }?.tokens, [])
        let again = await kvodError { try await admin.revokeToken(token.id, of: "feed") }
        expectEqual(again?.code, .notFound)
        try await admin.setPassword("new password", for: "feed", hashCost: .minimal)
        configuration.credentials = .password(user: "feed", password: "new password")
        let renewed = try await KVOClient.connect(to: configuration)
        expectEqual(try await renewed.get("t", of: "sensor-1"), 20)
        expectEqual(try await admin.removeUser("feed"), 1)
        expectEqual(try await admin.users().map(\.name), ["root"])
    }

    @Test("serverStatus, serverSettings, stateDigest and metricsText answer what status, config, digest and metrics say (issue 42)")
    func serverState() async throws {
        let server = try KVODProcess(["--max-connections", "77"])
        let kvod = try await server.client()
        try await kvod.create("a", values: ["x": 1] as JSONValue)
        let status = try await kvod.serverStatus()
        #expect(status["rev"] == 1 && status["objects"] == 1 && status["connections"]?["total"] == 1, "\(status)")
        let settings = try await kvod.serverSettings()
        let limit = settings.first { $0["name"] == "max-connections" }
        #expect(limit?["value"] == "77" && limit?["source"] == "flag", "\(settings)")
        let digest = try await kvod.stateDigest()
        #expect(digest["digest"]?.stringValue?.count == 64 && digest["rev"] == 1, "\(digest)")
        #expect(try await kvod.metricsText().contains("kvod_build_info{"))
    }
}
