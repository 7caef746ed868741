import KVOJSON
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
