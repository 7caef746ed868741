import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Ordered collections (insert/remove/replace, kinds 2-4), key paths through arrays, and collection
/// operators, at the engine level.
@Suite struct CollectionTests {
    let engine = KVOEngine()

    // MARK: - Mutations

    @Test func insertRemoveReplaceChangeTheArrayAndReportKinds() throws {
        try engine.create("list", ["items": ["a", "b", "c"]])
        _ = try engine.observe("list", "items", [.new, .old, .prior])

        var notifications = try engine.mutate("list", "items", .insert(indexes: [1, 3], values: ["x", "y"]))
        expectEqual(try engine.value("list", "items"), ["a", "x", "b", "y", "c"])
        expectEqual(notifications.count, 2)
        #expect(notifications[0].isPrior && notifications[0].kind == .insertion && notifications[0].indexes == [1, 3])
        let insertion = notifications[1]
        expectEqual(insertion.kind, .insertion)
        expectEqual(insertion.indexes, [1, 3])
        expectEqual(insertion.new, ["x", "y"])

        notifications = try engine.mutate("list", "items", .remove(indexes: [4, 0]))
        expectEqual(try engine.value("list", "items"), ["x", "b", "y"])
        expectEqual(notifications[1].kind, .removal)
        expectEqual(notifications[1].indexes, [0, 4])
        expectEqual(notifications[1].old, ["a", "c"])
        expectEqual(notifications[0].old, ["a", "c"], "the prior notification carries the elements about to go")

        notifications = try engine.mutate("list", "items", .replace(indexes: [2, 0], values: ["Y", "X"]))
        expectEqual(try engine.value("list", "items"), ["X", "b", "Y"])
        expectEqual(notifications[1].kind, .replacement)
        expectEqual(notifications[1].indexes, [0, 2])
        expectEqual(notifications[1].old, ["x", "y"])
        expectEqual(notifications[1].new, ["X", "Y"])

        notifications = try engine.mutate("list", "items", .insert(indexes: nil, values: ["z"]))
        expectEqual(try engine.value("list", "items"), ["X", "b", "Y", "z"])
        expectEqual(notifications[1].indexes, [3], "no index appends")

        // Setting the whole array stays a kind 1 setting.
        notifications = try engine.set("list", "items", ["only"])
        expectEqual(notifications[1].kind, .setting)
        expectEqual(notifications[1].indexes, nil)
        expectEqual(notifications[1].old, ["X", "b", "Y", "z"])
    }

    @Test func settingOneElementByIndexIsAReplacement() throws {
        try engine.create("list", ["items": [1, 2, 3]])
        _ = try engine.observe("list", "items")
        let notifications = try engine.set("list", "items.1", 20)
        expectEqual(try engine.value("list", "items"), [1, 20, 3])
        expectEqual(notifications.first?.kind, .replacement)
        expectEqual(notifications.first?.indexes, [1])
        #expect(notifications.first?.old == [2] && notifications.first?.new == [20])
    }

    @Test func refusedMutationsChangeNothing() throws {
        try engine.create("list", ["items": [1, 2], "name": "n"])
        _ = try engine.observe("list", "items")
        let cases: [(CollectionMutation, String, KVOError.Code)] = [
            (.insert(indexes: [3], values: [9]), "items", .outOfRange),
            (.insert(indexes: [0, 0], values: [8, 9]), "items", .badRequest),
            (.insert(indexes: [0], values: [8, 9]), "items", .badRequest),
            (.remove(indexes: [2]), "items", .outOfRange),
            (.remove(indexes: [1, 1]), "items", .badRequest),
            (.remove(indexes: []), "items", .badRequest),
            (.replace(indexes: [5], values: [0]), "items", .outOfRange),
            (.remove(indexes: [0]), "name", .typeMismatch),
            (.remove(indexes: [0]), "missing", .notFound),
            (.insert(indexes: nil, values: [1]), "items.@count", .badRequest),
        ]
        for (mutation, keyPath, code) in cases {
            #expect("\(mutation) at \(keyPath)", performing: { try engine.mutate("list", keyPath, mutation) },
                    throws: { ($0 as? KVOError)?.code == code })
        }
        expectEqual(try engine.value("list", "items"), [1, 2])
        expectEqual(engine.revision, 1)
    }

    @Test func writesIntoArraysNeedAnIndex() throws {
        try engine.create("order", ["items": [["price": 1], ["price": 2]]])
        #expect(performing: { try engine.set("order", "items.price", 5) }, throws: { ($0 as? KVOError)?.code == .typeMismatch })
        #expect(performing: { try engine.set("order", "items.7.price", 5) }, throws: { ($0 as? KVOError)?.code == .outOfRange })
        try engine.set("order", "items.1.price", 5)
        expectEqual(try engine.value("order", "items.1.price"), 5)
        expectEqual(try engine.value("order", "items.9"), .null, "reading past the end is null")
    }

    @Test func mutationsThroughAReferenceReachDirectObserversWithKinds() throws {
        try engine.create("cart1", ["items": ["apple"]])
        try engine.create("user", ["cart": .reference(to: "cart1")])
        _ = try engine.observe("user", "cart.items")
        let notifications = try engine.mutate("user", "cart.items", .insert(indexes: [0], values: ["pear"]))
        expectEqual(try engine.value("cart1", "items"), ["pear", "apple"])
        expectEqual(notifications.first?.object, "user")
        expectEqual(notifications.first?.kind, .insertion)
        expectEqual(notifications.first?.indexes, [0])
    }

    @Test func ancestorObserversOfAMutatedArraySeeASetting() throws {
        try engine.create("o", ["cart": ["items": [1]]])
        _ = try engine.observe("o", "cart")
        let notifications = try engine.mutate("o", "cart.items", .insert(indexes: nil, values: [2]))
        expectEqual(notifications.first?.kind, .setting)
        expectEqual(notifications.first?.old, ["items": [1]])
        expectEqual(notifications.first?.new, ["items": [1, 2]])
    }

    // MARK: - Key paths through arrays

    @Test func keyPathsMapOverArraysOfInlineObjectsAndReferences() throws {
        try engine.create("p1", ["price": 10])
        try engine.create("p2", ["price": 20])
        try engine.create("order", ["items": [.reference(to: "p1"), ["price": 5], .reference(to: "p2"), "junk"]])
        expectEqual(try engine.value("order", "items.price"), [10, 5, 20, .null])
        _ = try engine.observe("order", "items.price")

        var notifications = try engine.set("p2", "price", 25)
        expectEqual(notifications.count, 1)
        expectEqual(notifications[0].kind, .setting)
        expectEqual(notifications[0].old, [10, 5, 20, .null])
        expectEqual(notifications[0].new, [10, 5, 25, .null])

        notifications = try engine.set("order", "items.1.price", 6)
        expectEqual(notifications.first?.new, [10, 6, 25, .null])

        notifications = try engine.mutate("order", "items", .remove(indexes: [3]))
        expectEqual(notifications.first?.kind, .setting, "observers of items.price see the mapped array, kind 1")
        expectEqual(notifications.first?.new, [10, 6, 25])

        // After removing p1 from the array, p1's changes no longer notify.
        try engine.mutate("order", "items", .remove(indexes: [0]))
        #expect(try engine.set("p1", "price", 99).isEmpty)
    }

    // MARK: - Operators

    @Test func operatorsOnEmptyArrays() throws {
        try engine.create("o", ["items": []])
        let expectations: [(String, JSONValue)] = [
            ("items.@count", 0), ("items.@sum.price", 0), ("items.@avg.price", .null), ("items.@min.price", .null),
            ("items.@max.price", .null), ("items.@unionOfObjects.price", []), ("items.@distinctUnionOfObjects.price", []),
            ("items.@unionOfArrays.price", []), ("items.@distinctUnionOfArrays.price", []),
        ]
        for (keyPath, expected) in expectations {
            expectEqual(try engine.value("o", keyPath), expected, "\(keyPath)")
        }
        expectEqual(try engine.value("o", "missing.@count"), .null)
        #expect(throws: KVOError.self) { _ = try KeyPath("items.@count.x") }
    }

    @Test func operatorsOnMixedValues() throws {
        try engine.create("o", ["items": [
            ["price": 3, "city": "Oslo"], ["price": 1.5, "city": "Bergen"], ["price": "n/a", "city": "Oslo"],
            ["city": .null], ["price": 4, "city": "Bergen"],
        ]])
        expectEqual(try engine.value("o", "items.@count"), 5)
        expectEqual(try engine.value("o", "items.@sum.price"), 8.5)
        expectEqual(try engine.value("o", "items.@avg.price"), .double(8.5 / 3), "strings and missing values are not numbers")
        expectEqual(try engine.value("o", "items.@min.price"), 1.5)
        expectEqual(try engine.value("o", "items.@max.price"), 4)
        expectEqual(try engine.value("o", "items.@min.city"), "Bergen", "strings compare when there are no numbers")
        expectEqual(try engine.value("o", "items.@unionOfObjects.city"), ["Oslo", "Bergen", "Oslo", "Bergen"])
        expectEqual(try engine.value("o", "items.@distinctUnionOfObjects.city"), ["Oslo", "Bergen"])
        expectEqual(try engine.value("o", "items.@sum.city"), 0)
    }

    @Test func integerSumsStayIntegersAndNumbersCompareByValue() throws {
        try engine.create("o", ["n": [1, 2, 3], "mixed": [1, 1.0, 2]])
        expectEqual(try engine.value("o", "n.@sum"), .int(6))
        expectEqual(try engine.value("o", "n.@avg"), 2)
        expectEqual(try engine.value("o", "mixed.@distinctUnionOfObjects"), [1, 2])
    }

    @Test func unionOfArraysFlattens() throws {
        try engine.create("o", ["groups": [[["id": 1], ["id": 2]], [["id": 2], ["id": 3]], "not an array"]])
        expectEqual(try engine.value("o", "groups.@unionOfArrays.id"), [1, 2, 2, 3])
        expectEqual(try engine.value("o", "groups.@distinctUnionOfArrays.id"), [1, 2, 3])
    }

    @Test func operatorsFollowReferencesInElements() throws {
        try engine.create("a", ["city": "Oslo"])
        try engine.create("b", ["city": "Paris"])
        try engine.create("orders", ["list": [.reference(to: "a"), .reference(to: "b"), .reference(to: "a")]])
        expectEqual(try engine.value("orders", "list.@distinctUnionOfObjects.city"), ["Oslo", "Paris"])
        _ = try engine.observe("orders", "list.@distinctUnionOfObjects.city")
        let notifications = try engine.set("b", "city", "Oslo")
        expectEqual(notifications.first?.new, ["Oslo"])
    }

    @Test func aggregateObserversHearOnlyWhenTheAggregateChanges() throws {
        try engine.create("cart", ["items": [["price": 2], ["price": 3]]])
        let count = try engine.observe("cart", "items.@count")
        let sum = try engine.observe("cart", "items.@sum.price")

        var notifications = try engine.set("cart", "items.0.price", 4)
        expectEqual(notifications.flatMap(\.recipients).map(\.subscription), [sum])
        #expect(notifications.first?.old == 5 && notifications.first?.new == 7)

        notifications = try engine.mutate("cart", "items", .insert(indexes: nil, values: [["price": 0]]))
        expectEqual(notifications.flatMap(\.recipients).map(\.subscription), [count], "the sum did not change")
        expectEqual(notifications.first?.kind, .setting)
        #expect(notifications.first?.old == 2 && notifications.first?.new == 3)

        notifications = try engine.set("cart", "items.2.name", "free")
        #expect(notifications.isEmpty)
    }

    @Test func operatorPathsAreReadOnly() throws {
        try engine.create("o", ["items": [1]])
        #expect(performing: { try engine.set("o", "items.@count", 5) }, throws: { ($0 as? KVOError)?.code == .badRequest })
        #expect(throws: KVOError.self) { _ = try KeyPath("items.@bogus") }
        #expect(throws: KVOError.self) { _ = try KeyPath("@count") }
        #expect(throws: KVOError.self) { _ = try KeyPath("a.@sum.b.@sum.c") }
    }
}
