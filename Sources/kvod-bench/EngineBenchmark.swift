import KVOEngine
import KVOJSON
import KVOModel
import KVOServer

#if canImport(Glibc)
import Glibc
#endif

/// Engine-level benchmarks: no sockets, just the cost of a write and its notifications.
///
/// `fan-out scope`: a set on one observed object costs the same however many observations exist on
/// other objects (or on sibling key paths of the same object), because writes find their observers
/// through the per-object key-path tries rather than by scanning.
enum EngineBenchmark {
    struct Figure {
        let label: String
        let nanosecondsPerSet: Double
    }

    static func run(observations: Int, sets: Int) {
        print("engine fan-out scope: \(sets) sets on one observed key path, best of 5 runs")
        let baseline = measure("no other observations", sets: sets) { _ in }
        let otherObjects = measure("\(observations) observations on other objects", sets: sets) { engine in
            var ignored: [ChangeNotification] = []
            for index in 0..<observations {
                let id = "other\(index)"
                _ = try! engine.create(id, values: ["v": 0, "address": ["city": "Oslo"]], notifications: &ignored)
                _ = try! engine.observe(id, keyPath: KeyPath("address.city"), options: [.new, .old],
                                        connection: ConnectionID(2), notifications: &ignored)
            }
        }
        let siblings = measure("\(observations) observations on sibling keys of the same object", sets: sets) { engine in
            var ignored: [ChangeNotification] = []
            for index in 0..<observations {
                _ = try! engine.set("target", keyPath: KeyPath("k\(index)"), value: .int(Int64(index)), notifications: &ignored)
                _ = try! engine.observe("target", keyPath: KeyPath("k\(index)"), options: [.new],
                                        connection: ConnectionID(2), notifications: &ignored)
            }
        }
        let figures = [baseline, otherObjects, siblings]
        for figure in figures {
            let ratio = figure.nanosecondsPerSet / baseline.nanosecondsPerSet
            print(pad(figure.label, 62) + pad(String(format1(figure.nanosecondsPerSet)) + " ns/set", 16)
                  + "x" + format2(ratio))
        }
    }

    /// Issue 11: what permission checks add to a set, without the network: sets on one observed key path
    /// in open mode and as a user whose rules are `globs` globs (the one matching the object last), in
    /// alternating batches so that other work on the machine falls on both alike; the best batch of each.
    static func runPermissions(sets: Int, globs: Int) {
        print("")
        print("permission checks: \(sets) sets on one observed key path, open mode against a user with \(globs) glob rules, best of 10 alternating batches")
        let rules = (0..<max(globs - 1, 0)).map { $0 % 2 == 0 ? "zone-\($0)-*=read,write" : "*-zone-\($0)=read,write" }
            + ["bench*=read,write"]
        let policy = AccessPolicy(rules: rules.map { try! AccessRule(argument: $0) })
        let accesses = [ConnectionAccess.open(), ConnectionAccess(Principal(user: "bench", policy: policy))]
        let engines = accesses.map { access -> KVOEngine in
            let engine = KVOEngine()
            var ignored: [ChangeNotification] = []
            _ = try! engine.create("bench", values: ["v": 0], access: access, notifications: &ignored)
            _ = try! engine.observe("bench", keyPath: KeyPath("v"), options: [.new], connection: ConnectionID(1),
                                    access: access, notifications: &ignored)
            return engine
        }
        let keyPath = try! KeyPath("v")
        var best = [Double.infinity, Double.infinity]
        var notifications: [ChangeNotification] = []
        notifications.reserveCapacity(4)
        var counter: Int64 = 0
        for _ in 0..<10 {
            for index in 0..<2 {
                let start = monotonicNanoseconds()
                for _ in 0..<(sets / 10) {
                    counter += 1
                    notifications.removeAll(keepingCapacity: true)
                    _ = try! engines[index].set("bench", keyPath: keyPath, value: .int(counter), access: accesses[index],
                                                notifications: &notifications)
                }
                best[index] = min(best[index], Double(monotonicNanoseconds() - start) / Double(sets / 10))
            }
        }
        print(pad("open mode", 40) + pad(format1(best[0]) + " ns/set", 16) + "x1.00")
        print(pad("a user with \(globs) glob rules", 40) + pad(format1(best[1]) + " ns/set", 16) + "x" + format2(best[1] / best[0]))
    }

    /// Cost of one element write under an aggregate observation, against the array's size.
    static func runAggregates(sets: Int) {
        print("")
        print("aggregate upkeep: set items.<i>.price under one observation of the key path, best of 5 runs")
        print(pad("key path", 28) + pad("elements", 12) + "ns/set")
        for keyPath in ["items.@count", "items.@sum.price", "items.@avg.price", "items.@max.price"] {
            for size in [10, 1_000, 100_000] {
                let engine = KVOEngine()
                var notifications: [ChangeNotification] = []
                let items = (0..<size).map { JSONValue.object(["price": .int(Int64($0 % 100))]) }
                _ = try! engine.create("cart", values: ["items": .array(items)], notifications: &notifications)
                _ = try! engine.observe("cart", keyPath: KeyPath(keyPath), options: [.new, .old],
                                        connection: ConnectionID(1), notifications: &notifications)
                let paths = (0..<min(size, 1000)).map { try! KeyPath("items.\($0).price") }
                let rounds = size >= 100_000 && keyPath.contains("@max") ? max(sets / 1000, 20) : sets
                var best = Double.infinity
                for _ in 0..<5 {
                    let start = monotonicNanoseconds()
                    for index in 0..<rounds {
                        notifications.removeAll(keepingCapacity: true)
                        _ = try! engine.set("cart", keyPath: paths[index % paths.count], value: .int(Int64(index % 1000)),
                                            notifications: &notifications)
                    }
                    best = min(best, Double(monotonicNanoseconds() - start) / Double(rounds))
                }
                print(pad(keyPath, 28) + pad(String(size), 12) + format1(best))
            }
        }
    }

    /// Builds an engine with `target` = {"v": 0} observed once, lets `populate` add load, then times
    /// `sets` sets of target.v (each notifies the one observer).
    private static func measure(_ label: String, sets: Int, populate: (KVOEngine) -> Void) -> Figure {
        let engine = KVOEngine()
        var notifications: [ChangeNotification] = []
        _ = try! engine.create("target", values: ["v": 0], notifications: &notifications)
        populate(engine)
        _ = try! engine.observe("target", keyPath: KeyPath("v"), options: [.new, .old],
                                connection: ConnectionID(1), notifications: &notifications)
        let keyPath = try! KeyPath("v")
        var best = Double.infinity
        var delivered = 0
        for _ in 0..<5 {
            let start = monotonicNanoseconds()
            for index in 0..<sets {
                notifications.removeAll(keepingCapacity: true)
                _ = try! engine.set("target", keyPath: keyPath, value: .int(Int64(index + 1)), notifications: &notifications)
                delivered += notifications.count
            }
            best = min(best, Double(monotonicNanoseconds() - start) / Double(sets))
        }
        precondition(delivered >= sets, "the observer was not notified")
        return Figure(label: label, nanosecondsPerSet: best)
    }
}

func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

func pad(_ text: String, _ width: Int) -> String {
    text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
}

func format1(_ value: Double) -> String {
    let scaled = (value * 10).rounded() / 10
    return String(scaled)
}

func format2(_ value: Double) -> String {
    let scaled = (value * 100).rounded() / 100
    return String(scaled)
}
