import KVOJSON

/// A seeded random log of write requests for the cluster's determinism test: creates (free-form objects
/// `o0`…`o7` with nested values, objects `c0`…`c3` of class `Item`), sets through key paths (some through
/// missing intermediates), increments (of numbers, of missing keys, of strings, past a class's maximum), array inserts, removes and replaces (some out of range), deletes, writes the
/// class refuses (levels over its maximum, tags too long, sets of its computed properties), and bindings:
/// `bind` (with and without a `convert` expression and `now`, some into the class's validated `level`),
/// `combineLatest` and `unbind` of ids that may or may not exist (bindings whose objects are deleted go too,
/// and a binding write the target refuses is a `refused` notice), one write in five with a condition (`ifExists`,
/// `ifAbsent`, `ifEquals`: applied or refused with `conflict` alike on every node), and one request in twelve a
/// `batch` of such writes. The same seed gives the same log. A
/// value; any thread.
struct RandomOperationLog {
    /// The class the log's `c…` objects belong to: validated properties and two computed ones.
    static let itemClass = #"""
        {"name":"Item","properties":{"level":{"type":"integer","min":0,"max":100,"default":0},
         "tags":{"type":"array","items":{"type":"string","maxLength":4},"maxLength":6},"meta":{"type":"object"}},
         "computed":{"double":"level * 2","tagCount":"len(tags)"}}
        """#

    /// The requests, each as `op` and its parameters (no `id`).
    let operations: [(op: String, params: [String: JSONValue])]

    init(seed: UInt64, count: Int) {
        var random = SplitMix64(state: seed)
        var operations: [(op: String, params: [String: JSONValue])] = []
        operations.reserveCapacity(count)
        for _ in 0..<count {
            if random.below(12) == 0 {
                operations.append(RandomOperationLog.batch(&random))
                continue
            }
            var operation = RandomOperationLog.operation(&random)
            RandomOperationLog.addCondition(to: &operation, &random)
            operations.append(operation)
        }
        self.operations = operations
    }

    private static func operation(_ random: inout SplitMix64) -> (op: String, params: [String: JSONValue]) {
        let roll = random.below(100)
        let free = random.below(4) > 0  // three in four operations on free-form objects
        let object = JSONValue.string(free ? "o\(random.below(8))" : "c\(random.below(4))")
        switch roll {
        case 0..<15:
            if free {
                return ("create", ["object": object, "values": .object([
                    "a": .object(["b": .int(Int64(random.below(50))), "c": nested(&random, depth: 2)]),
                    "list": .array((0..<random.below(4)).map { _ in .int(Int64(random.below(100))) }),
                    "s": .string(word(&random)),
                ])])
            }
            return ("create", ["object": object, "class": "Item",
                               "values": .object(["level": .int(Int64(random.below(120))), "tags": .array([])])])
        case 50..<55:
            // Read-modify-writes: every node must read the same value at the same point of the stream.
            let by: JSONValue = random.below(4) == 0 ? .double(Double(random.below(8)) / 4) : .int(Int64(random.below(21)) - 5)
            if free {
                // `a.b` holds numbers or not (type_mismatch), `counter` starts missing.
                return ("increment", ["object": object, "keyPath": .string(["a.b", "counter", "s"][random.below(3)]), "by": by])
            }
            return ("increment", ["object": object, "keyPath": "level", "by": by])  // past 100, or a double: refused
        case 15..<50:
            if free {
                let keyPath = ["a.b", "a.c", "a.d.e", "s", "a", "a.c.x"][random.below(6)]
                return ("set", ["object": object, "keyPath": .string(keyPath), "value": nested(&random, depth: 3)])
            }
            switch random.below(5) {
            case 0, 1: return ("set", ["object": object, "keyPath": "level", "value": .int(Int64(random.below(115)) - 5)])
            case 2: return ("set", ["object": object, "keyPath": "tags",
                                    "value": .array((0..<random.below(8)).map { _ in .string(word(&random)) })])
            case 3: return ("set", ["object": object, "keyPath": "meta", "value": nested(&random, depth: 2)])
            default: return ("set", ["object": object, "keyPath": "double", "value": 4])  // read_only
            }
        case 55..<72:
            let values: [JSONValue] = (0..<(1 + random.below(2))).map { _ in free ? .int(Int64(random.below(100))) : .string(word(&random)) }
            var params: [String: JSONValue] = ["object": object, "keyPath": free ? "list" : "tags", "values": .array(values)]
            if random.below(3) > 0 { params["index"] = .int(Int64(random.below(5))) }
            return ("insert", params)
        case 72..<83:
            return ("remove", ["object": object, "keyPath": free ? "list" : "tags", "index": .int(Int64(random.below(4)))])
        case 83..<94:
            let value: JSONValue = free ? .int(Int64(random.below(100))) : .string(word(&random))
            return ("replace", ["object": object, "keyPath": free ? "list" : "tags",
                                "index": .int(Int64(random.below(4))), "value": value])
        case 94..<97:
            return binding(&random)
        default:
            return ("delete", ["object": object])
        }
    }

    /// A `batch` of two to four writes of objects (conditions included), applied all or nothing alike on
    /// every node: often refused as a whole by one part (a missing object, a class's limit, a condition).
    private static func batch(_ random: inout SplitMix64) -> (op: String, params: [String: JSONValue]) {
        var parts: [JSONValue] = []
        let count = 2 + random.below(3)
        while parts.count < count {
            var operation = operation(&random)
            guard ["create", "delete", "set", "increment", "insert", "remove", "replace"].contains(operation.op) else { continue }
            addCondition(to: &operation, &random)
            var part = operation.params
            part["op"] = .string(operation.op)
            parts.append(.object(part))
        }
        return ("batch", ["ops": .array(parts)])
    }

    /// One write in five of one object carries a condition (issue 30), which every node must decide alike:
    /// `ifExists`, `ifAbsent`, or `ifEquals` on a key path that often holds (`counter`, missing until an
    /// increment: null) or sometimes does (`a.b`, `level`: small numbers).
    private static func addCondition(to operation: inout (op: String, params: [String: JSONValue]), _ random: inout SplitMix64) {
        guard ["create", "delete", "set", "increment", "insert", "remove", "replace"].contains(operation.op),
              random.below(5) == 0 else { return }
        switch random.below(4) {
        case 0: operation.params["ifExists"] = true
        case 1: operation.params["ifAbsent"] = true
        case 2: operation.params["ifEquals"] = ["keyPath": "counter", "value": .null]
        default:
            let keyPath: JSONValue = operation.params["object"]?.stringValue?.hasPrefix("c") == true ? "level" : "a.b"
            operation.params["ifEquals"] = ["keyPath": keyPath, "value": .int(Int64(random.below(5)))]
        }
    }

    /// A binding operation between the log's objects.
    private static func binding(_ random: inout SplitMix64) -> (op: String, params: [String: JSONValue]) {
        func endpoint(_ object: String, _ keyPath: String) -> JSONValue {
            ["object": .string(object), "keyPath": .string(keyPath)]
        }
        let source = { (random: inout SplitMix64) in endpoint("o\(random.below(8))", ["a.b", "s", "list", "a.c"][random.below(4)]) }
        switch random.below(6) {
        case 0, 1:
            var params: [String: JSONValue] = ["from": source(&random), "to": endpoint("o\(random.below(8))", ["bound", "a.d"][random.below(2)])]
            if random.below(2) == 0 { params["now"] = true }
            return ("bind", params)
        case 2:
            // Into the class's validated level: numbers over 100 and non-numbers are refused.
            return ("bind", ["from": endpoint("o\(random.below(8))", "a.b"), "to": endpoint("c\(random.below(4))", "level"),
                             "convert": "$value * 3", "now": .bool(random.below(2) == 0)])
        case 3:
            return ("combineLatest", ["sources": .array([source(&random), source(&random)]),
                                      "to": endpoint("o\(random.below(8))", "combined"), "reduce": "[$0, $1]"])
        default:
            return ("unbind", ["binding": .int(Int64(1 + random.below(16)))])
        }
    }

    /// A short word: 1 to 6 letters (tags over 4 are refused by the class).
    private static func word(_ random: inout SplitMix64) -> String {
        let letters = Array("abcdefghij")
        return String((0..<(1 + random.below(6))).map { _ in letters[random.below(letters.count)] })
    }

    /// A scalar, array or object, nested up to `depth`.
    private static func nested(_ random: inout SplitMix64, depth: Int) -> JSONValue {
        switch depth > 0 ? random.below(6) : random.below(3) {
        case 0: return .int(Int64(random.below(1000)) - 500)
        case 1: return .string(word(&random))
        case 2: return random.below(2) == 0 ? .bool(true) : .null
        case 3, 4:
            var members: [String: JSONValue] = [:]
            for _ in 0..<random.below(4) { members[word(&random)] = nested(&random, depth: depth - 1) }
            return .object(members)
        default:
            return .array((0..<random.below(4)).map { _ in nested(&random, depth: depth - 1) })
        }
    }
}
