import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Incrementally kept aggregates must always equal a full re-read, and notify exactly when that
/// value changes. A seeded random walk of writes checks both.
@Suite struct AggregateCacheTests {
    private static let watchedPaths = [
        "items.@count", "items.@sum.price", "items.@avg.price", "items.@sum.qty", "items.@avg.qty",
        "items.@max.price", "items.price",
    ]

    @Test(arguments: [1, 2, 3, 4, 5] as [UInt64])
    func randomWritesKeepEveryAggregateEqualToAFullReading(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.create("cart", values: ["items": [["price": 1, "qty": 1.5]]], notifications: &notifications)
        _ = try engine.create("other", values: ["price": 7], notifications: &notifications)
        var seen: [String: JSONValue] = [:]
        for keyPath in Self.watchedPaths {
            notifications.removeAll()
            _ = try engine.observe("cart", keyPath: KeyPath(keyPath), options: [.new, .initial], connection: ConnectionID(1),
                                   notifications: &notifications)
            seen[keyPath] = notifications.first?.new
        }
        let cachedCount = Self.watchedPaths.filter { $0.contains("@count") || $0.contains("@sum") || $0.contains("@avg") }.count
        expectEqual(cachedCount, 5)

        func randomElement() -> JSONValue {
            switch Int.random(in: 0..<6, using: &random) {
            case 0: return ["price": .int(Int64.random(in: -5...20, using: &random)), "qty": .double(Double(Int.random(in: 0...8, using: &random)) / 4)]
            case 1: return ["price": .double(Double(Int.random(in: 0...40, using: &random)) / 8)]
            case 2: return ["price": "n/a", "qty": 2]
            case 3: return .reference(to: "other")  // leaves the array's object: full re-reads from here on
            case 4: return ["qty": .int(Int64.random(in: 0...3, using: &random))]
            default: return .int(Int64.random(in: 0...3, using: &random))
            }
        }

        for step in 0..<400 {
            notifications.removeAll()
            let count = try engine.get("cart", keyPath: KeyPath("items.@count")).intValue!
            let index = count > 0 ? Int.random(in: 0..<Int(count), using: &random) : 0
            let roll = Int.random(in: 0..<10, using: &random)
            do {
                switch roll {
                case 0, 1:
                    _ = try engine.mutateArray("cart", keyPath: KeyPath("items"),
                                               .insert(indexes: [Int.random(in: 0...Int(count), using: &random)], values: [randomElement()]),
                                               notifications: &notifications)
                case 2 where count > 0:
                    _ = try engine.mutateArray("cart", keyPath: KeyPath("items"), .remove(indexes: [index]), notifications: &notifications)
                case 3 where count > 0:
                    _ = try engine.mutateArray("cart", keyPath: KeyPath("items"), .replace(indexes: [index], values: [randomElement()]),
                                               notifications: &notifications)
                case 4 where count > 0, 5 where count > 0:
                    _ = try engine.set("cart", keyPath: KeyPath("items.\(index).price"),
                                       value: .int(Int64.random(in: 0...9, using: &random)), notifications: &notifications)
                case 6 where count > 0:
                    _ = try engine.set("cart", keyPath: KeyPath("items.\(index).qty"),
                                       value: .double(Double(Int.random(in: 0...9, using: &random)) / 2), notifications: &notifications)
                case 7:
                    _ = try engine.set("other", keyPath: KeyPath("price"), value: .int(Int64.random(in: 0...9, using: &random)),
                                       notifications: &notifications)
                case 8 where step % 50 == 0:
                    _ = try engine.set("cart", keyPath: KeyPath("items"), value: [randomElement()], notifications: &notifications)
                default:
                    _ = try engine.set("cart", keyPath: KeyPath("label"), value: .int(Int64(step)), notifications: &notifications)
                }
            } catch {
                // Writes into elements that are not objects are refused; that is fine here.
                #expect(notifications.isEmpty)
            }
            for notification in notifications where !notification.isPrior {
                #expect(notification.new != seen[notification.keyPath], "step \(step): a notification that changed nothing")
                seen[notification.keyPath] = notification.new
            }
            for keyPath in Self.watchedPaths {
                let full = try engine.get("cart", keyPath: KeyPath(keyPath))
                expectEqual(seen[keyPath], full, "seed \(seed) step \(step): \(keyPath) notified \(seen[keyPath]!) but reads \(full)")
            }
        }
        #expect(engine.incrementalAggregateUpdates > 100, "the incremental path was exercised")
    }

    /// Multi-index insertions and removals (edited in one pass) of integers near the 64-bit bounds, whose
    /// partial sums overflow and come back: the kept `@sum` and `@avg` equal a full reading at every step,
    /// and the sum is an integer exactly when the exact sum fits (issue 10, items 5 and 9).
    @Test(arguments: [11, 12, 13] as [UInt64])
    func multiIndexEditsOfHugeIntegersStayExact(seed: UInt64) throws {
        var random = SplitMix64(state: seed)
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try engine.create("c", values: ["v": []], notifications: &notifications)
        let paths = ["v.@sum", "v.@avg", "v.@count"]
        var seen: [String: JSONValue] = [:]
        for keyPath in paths {
            notifications.removeAll()
            _ = try engine.observe("c", keyPath: KeyPath(keyPath), options: [.new, .initial], connection: ConnectionID(1),
                                   notifications: &notifications)
            seen[keyPath] = notifications.first?.new
        }
        let values: [Int64] = [.max, .max - 1, .min, .min + 1, 1, -1, 0, 1 << 62, -(1 << 62)]
        var model: [Int64] = []
        for step in 0..<300 {
            notifications.removeAll()
            if model.isEmpty || Int.random(in: 0..<2, using: &random) == 0 {
                let count = Int.random(in: 1...4, using: &random)
                var indexes: Set<Int> = []
                while indexes.count < count { indexes.insert(Int.random(in: 0...(model.count + count - 1), using: &random)) }
                let sorted = indexes.sorted()
                guard sorted.enumerated().allSatisfy({ $0.element <= model.count + $0.offset }) else { continue }
                let inserted = sorted.map { _ in values[Int.random(in: 0..<values.count, using: &random)] }
                _ = try engine.mutateArray("c", keyPath: KeyPath("v"),
                                           .insert(indexes: sorted, values: inserted.map { .int($0) }), notifications: &notifications)
                for (index, value) in zip(sorted, inserted) { model.insert(value, at: index) }
            } else {
                var indexes: Set<Int> = []
                let count = Int.random(in: 1...min(4, model.count), using: &random)
                while indexes.count < count { indexes.insert(Int.random(in: 0..<model.count, using: &random)) }
                _ = try engine.mutateArray("c", keyPath: KeyPath("v"), .remove(indexes: Array(indexes)),
                                           notifications: &notifications)
                for index in indexes.sorted().reversed() { model.remove(at: index) }
            }
            for notification in notifications where !notification.isPrior { seen[notification.keyPath] = notification.new }
            for keyPath in paths {
                expectEqual(seen[keyPath], (try engine.get("c", keyPath: KeyPath(keyPath))), "seed \(seed) step \(step): \(keyPath)")
            }
            // The exact sum, in 128 bits: an integer exactly when it fits. (An observer is not told when the
            // sum only turns from 2^63 as an integer into the equal double: numbers compare by value.)
            let exact = model.reduce(Int128(0)) { $0 + Int128($1) }
            let sum = try engine.get("c", keyPath: KeyPath("v.@sum"))
            if let fits = Int64(exactly: exact) {
                expectEqual(sum, .int(fits), "seed \(seed) step \(step)")
                if case .int = sum {} else { Issue.record("seed \(seed) step \(step): \(sum) is not an integer") }
            } else if case .double = sum {} else {
                Issue.record("seed \(seed) step \(step): \(sum) for \(exact) is not a double")
            }
        }
        expectEqual(try engine.get("c", keyPath: KeyPath("v")), .array(model.map { .int($0) }))
        #expect(engine.incrementalAggregateUpdates > 100, "the incremental path was exercised")
    }
}
