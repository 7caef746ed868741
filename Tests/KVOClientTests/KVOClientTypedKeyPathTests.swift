import Foundation
import KVOClient
import Testing

@testable import KVOTestSupport

/// Issue 29, item 6: Swift key paths over the app's model name kvod's key paths from the model's coding keys,
/// and the typed forms (`observe(\TodoList.owner.city, of:)`, `set(_:of:to:)`, `get(_:of:)`) work against the
/// real kvod with the key path's value type.
@Suite struct KVOClientTypedKeyPathTests {
    enum Status: String, Codable, CaseIterable, Sendable { case open, closed }
    enum Priority: String, Codable, Sendable { case low, high }

    struct Address: Codable, Sendable {
        var city: String
        var zip: Int
    }

    struct Person: Codable, Sendable {
        var name: String
        var address: Address
    }

    struct Item: Codable, Sendable {
        var text: String
        var done: Bool
    }

    struct TodoList: Codable, Sendable {
        var title: String
        var owner: Person
        var items: [Item]
        var done: Bool
        var archived: Bool
        var count: Int
        var small: Int8
        var score: Double
        var nickname: String?
        var status: Status
        var labels: [String: String]
        /// Not decoded: left at its default, never taken for a leaf.
        var localCount = 3

        enum CodingKeys: String, CodingKey {
            case title, owner = "owned_by", items, done, archived, count, small, score, nickname, status, labels
        }
    }

    struct Flags: Codable, Sendable {
        var first: Bool
        var second: Bool
    }

    struct WithPriority: Codable, Sendable {
        var priority: Priority
    }

    @Test("key paths are named from the model's coding keys: leaves of every kind, nested values, renamed keys")
    func names() throws {
        let expected: [(PartialKeyPath<TodoList>, String)] = [
            (\TodoList.title, "title"),
            (\TodoList.owner, "owned_by"),
            (\TodoList.owner.name, "owned_by.name"),
            (\TodoList.owner.address, "owned_by.address"),
            (\TodoList.owner.address.city, "owned_by.address.city"),
            (\TodoList.owner.address.zip, "owned_by.address.zip"),
            (\TodoList.items, "items"),
            (\TodoList.done, "done"),
            (\TodoList.archived, "archived"),
            (\TodoList.count, "count"),
            (\TodoList.small, "small"),
            (\TodoList.score, "score"),
            (\TodoList.nickname, "nickname"),
            (\TodoList.status, "status"),
        ]
        for (keyPath, name) in expected {
            expectEqual(try Self.name(keyPath), name, "\(keyPath)")
        }
        expectEqual(try KVOClient.keyPathName(\Flags.first), "first")
        expectEqual(try KVOClient.keyPathName(\Flags.second), "second")
    }

    /// `keyPathName` for a partial key path of `TodoList` (opened to its value type).
    private static func name(_ keyPath: PartialKeyPath<TodoList>) throws -> String {
        func open<Value>(_ typed: KeyPath<TodoList, Value>) throws -> String { try KVOClient.keyPathName(typed) }
        func dispatch<Value>(_ type: Value.Type) throws -> String {
            guard let typed = keyPath as? KeyPath<TodoList, Value> else { throw KVODError.coding("not a key path of TodoList") }
            return try open(typed)
        }
        return try _openExistential(type(of: keyPath).valueType, do: dispatch)
    }

    @Test("what cannot be named is a coding error that says to use the string form, not a wrong name")
    func unnameable() {
        for (keyPath, what) in [(\TodoList.labels as PartialKeyPath<TodoList>, "an empty dictionary"),
                                (\TodoList.localCount, "a property the model does not decode")] {
            do {
                let name = try Self.name(keyPath)
                Issue.record("\(what) was named \(name)")
            } catch let KVODError.coding(message) {
                #expect(message.contains("string key path"), "\(message)")
            } catch {
                Issue.record("\(what): \(error)")
            }
        }
        // An enum with a raw value that is not CaseIterable refuses the placeholder: the model cannot be named.
        do {
            let name = try KVOClient.keyPathName(\WithPriority.priority)
            Issue.record("named \(name)")
        } catch let KVODError.coding(message) {
            #expect(message.contains("WithPriority"), "\(message)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test("observe, set and get with typed key paths against kvod: the key path's type in and out, renamed keys followed")
    func typedRequestsOverTCP() async throws {
        let server = try KVODProcess()
        let kvod = try await server.client()
        let list = TodoList(title: "Groceries", owner: Person(name: "Ada", address: Address(city: "Paris", zip: 75001)),
                            items: [Item(text: "milk", done: false)], done: false, archived: false, count: 1, small: 2,
                            score: 0.5, nickname: nil, status: .open, labels: [:])
        try await kvod.create("list-1", values: list)
        let changes = try await kvod.subscribe(\TodoList.owner.address.city, of: "list-1", options: [.initial, .new])
        var iterator = changes.makeAsyncIterator()
        let initial = try await iterator.next()
        expectEqual(initial?.new, "Paris")
        let rev = try await kvod.set(\TodoList.owner.address.city, of: "list-1", to: "Lyon")
        let change = try await iterator.next()
        #expect(change?.new == "Lyon" && change?.rev == rev)
        // The renamed key is what the server holds.
        expectEqual(try await kvod.get("owned_by.address.city", of: "list-1", as: String.self).value, "Lyon")
        try await kvod.set(\TodoList.status, of: "list-1", to: .closed)
        expectEqual(try await kvod.get(\TodoList.status, of: "list-1").value, .closed)
        expectEqual(try await kvod.get(\TodoList.owner, of: "list-1").value.address.zip, 75001)
        // The whole list still decodes as the model.
        expectEqual(try await kvod.get("list-1", as: TodoList.self).value.owner.address.city, "Lyon")
        changes.cancel()
    }
}
