import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `SortedObjectIDs` against a naive sorted set, under seeded random inserts, removals and pages;
/// and the engine's index against its objects through every path that creates or deletes one.
@Suite struct SortedObjectIDsTests {
    /// Ids that share long prefixes, differ only at the end, are empty, non-ASCII, canonically
    /// equivalent (é and e + U+0301 are one Swift string) or hold control characters.
    private static func idPool(_ random: inout SplitMix64) -> [String] {
        var pool = ["", "a", "aa", "aaa", "aab", "ab", "b", "é", "e\u{301}", "e", "f", "日本", "日本語", "🙂", "🙂🙂",
                    "\u{0}", "\u{0}\u{0}", "evil\nroot", "Z", "z", "~"]
        for index in 0..<3000 {
            switch random.next() % 4 {
            case 0: pool.append("object-\(index)")
            case 1: pool.append(String(repeating: "p", count: 40) + "\(index % 97)-\(index)")
            case 2: pool.append("ü\(random.next() % 100_000)")
            default: pool.append(String(random.next() % 1_000_000, radix: 36))
            }
        }
        return pool
    }

    /// The first ids greater than `after` in `sorted`, at most `limit`.
    private static func naivePage(_ sorted: [String], after: String?, limit: Int) -> [String] {
        let start = after.map { after in sorted.firstIndex { $0 > after } ?? sorted.count } ?? 0
        return Array(sorted[start..<min(sorted.count, start + limit)])
    }

    @Test(arguments: [1, 2, 3] as [UInt64])
    func agreesWithASortedSetUnderRandomChanges(seed: UInt64) {
        var random = SplitMix64(state: seed)
        let pool = Self.idPool(&random)
        var index = SortedObjectIDs()
        var naive = Set<String>()
        // Grow past many chunks, then shrink to nothing, then grow again: splits and merges both run.
        for phase in [0.8, 0.2, 0.0, 0.7] {
            for _ in 0..<6000 {
                let id = pool[Int(random.next() % UInt64(pool.count))]
                let insert = Double(random.next() % 1000) / 1000 < phase || naive.isEmpty && phase > 0
                if insert {
                    expectEqual(index.insert(id), naive.insert(id).inserted)
                } else {
                    expectEqual(index.remove(id), (naive.remove(id) != nil))
                }
                expectEqual(index.count, naive.count)
                expectEqual(index.contains(id), naive.contains(id))
            }
            let sorted = naive.sorted()
            expectEqual(index.all, sorted, "phase \(phase)")
            let sizes = index.chunkSizes
            #expect(sizes.allSatisfy { $0 > 0 && $0 <= SortedObjectIDs.chunkCapacity })
            if sizes.count > 1 { #expect(sizes.allSatisfy { $0 >= SortedObjectIDs.chunkMinimum }, "\(sizes)") }
            for _ in 0..<300 {
                let after: String? = random.next() % 10 == 0 ? nil : pool[Int(random.next() % UInt64(pool.count))]
                let limit = Int(random.next() % 700) + 1
                var cursor = index.ids(after: after)
                var page: [String] = []
                while page.count < limit, let id = cursor.next() { page.append(id) }
                let expected = Self.naivePage(sorted, after: after, limit: limit)
                expectEqual(page, expected, "after \(String(describing: after)) limit \(limit)")
                let remaining = sorted.count - (after.map { after in sorted.firstIndex { $0 > after } ?? sorted.count } ?? 0)
                expectEqual(cursor.hasNext, (remaining > limit))
            }
        }
    }

    @Test func buildsFromUnsortedIdsWithOneSort() {
        var random = SplitMix64(state: 9)
        let ids = Set((0..<5000).map { _ in String(random.next() % 1_000_000) })
        let index = SortedObjectIDs(ids)
        expectEqual(index.count, ids.count)
        expectEqual(index.all, ids.sorted())
        #expect(index.chunkSizes.allSatisfy { $0 >= SortedObjectIDs.chunkMinimum && $0 <= SortedObjectIDs.chunkCapacity })
        expectEqual(Array(index.ids(after: index.all[4000]).prefix(3)), Array(ids.sorted()[4001..<4004]))
        expectEqual(SortedObjectIDs([]).ids(after: "x").hasNext, false)
        for size in [0, 1, 383, 384, 385, 769, 1153] {
            let built = SortedObjectIDs((0..<size).map { "id\($0)" })
            expectEqual(built.all, (0..<size).map { "id\($0)" }.sorted())
            #expect(built.chunkSizes.allSatisfy { $0 <= SortedObjectIDs.chunkCapacity })
            if built.chunkSizes.count > 1 {
                #expect(built.chunkSizes.allSatisfy { $0 >= SortedObjectIDs.chunkMinimum }, "\(size): \(built.chunkSizes)")
            }
        }
    }

    /// A built index has full chunks (a load's ids at 16 bytes each); inserting into them splits each the first
    /// time, and every change keeps the order and the chunk bounds.
    @Test func aBuiltIndexHasFullChunksThatSplitOnInsertion() {
        var random = SplitMix64(state: 5)
        for size in [511, 512, 513, 1024, 1537, 5000] {
            var index = SortedObjectIDs((0..<size).map { String(format: "id%06d", $0 * 2) })
            var expected = Set((0..<size).map { String(format: "id%06d", $0 * 2) })
            expectEqual(index.chunkSizes.count, (size + SortedObjectIDs.chunkCapacity - 1) / SortedObjectIDs.chunkCapacity)
            #expect(index.chunkSizes.max()! - index.chunkSizes.min()! <= 1, "\(size): nearly equal sizes")
            for _ in 0..<2_000 {
                let id = String(format: "id%06d", Int(random.next() % UInt64(size * 2 + 10)))
                if random.next() % 3 == 0 {
                    expectEqual(index.remove(id), (expected.remove(id) != nil))
                } else {
                    expectEqual(index.insert(id), expected.insert(id).inserted)
                }
            }
            expectEqual(index.all, expected.sorted())
            #expect(index.chunkSizes.allSatisfy { $0 <= SortedObjectIDs.chunkCapacity })
            if index.chunkSizes.count > 1 { #expect(index.chunkSizes.allSatisfy { $0 >= SortedObjectIDs.chunkMinimum }) }
        }
    }

    /// Every path that adds or removes an object keeps the engine's index equal to its objects'
    /// sorted keys: create, delete (of an object that bindings and observations reach), and restore.
    @Test func engineIndexFollowsEveryCreateDeleteAndRestore() throws {
        var random = SplitMix64(state: 42)
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        for round in 0..<3000 {
            let id = "o\(random.next() % 400)"
            if random.next() % 3 == 0 {
                _ = try? engine.delete(id, notifications: &notifications)
            } else {
                _ = try? engine.create(id, values: ["v": .int(Int64(round)), "ref": .string("o\(random.next() % 400)")],
                                       notifications: &notifications)
                if random.next() % 50 == 0 {
                    _ = try? engine.observe(id, keyPath: KeyPath("v"), options: [.new], connection: ConnectionID(1),
                                            notifications: &notifications)
                }
            }
            notifications.removeAll()
        }
        expectEqual(engine.objectIDs(), engine.objects.keys.sorted())
        expectEqual(Array(engine.objectIDs(after: nil)), engine.objects.keys.sorted())
        let restored = KVOEngine(restoring: PersistedState(objects: engine.objects, revision: engine.revision))
        expectEqual(restored.objectIDs(), engine.objects.keys.sorted())
        _ = try restored.create("new", values: [:], notifications: &notifications)
        _ = try restored.delete(restored.objectIDs()[0], notifications: &notifications)
        expectEqual(restored.objectIDs(), restored.objects.keys.sorted())
    }
}
