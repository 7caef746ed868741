// kvod-combine: several KVOClient observations composed with swift-async-algorithms:
// - combineLatest: a thermostat's `temperature` and `target`, combined into "heat on/off" on every change
//   of either;
// - merge: the changes of two rooms as one stream (each room's in order; between rooms, `rev` tells
//   the order of the writes: merge interleaves as each observation yields);
// - debounce: a burst of writes to `target` settles to its last value.
// It creates its own objects (thermostat, kitchen, hall) on a running kvod, writes to them, and prints
// what each composition yields. Objects of those names are replaced.
//
//     cd examples/combine && swift run kvod-combine [--host 127.0.0.1] [--port 7420]
import AsyncAlgorithms
import KVOClient

var host = "127.0.0.1"
var port = 7420
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--host": host = arguments.popFirst() ?? host
    case "--port": port = arguments.popFirst().flatMap { Int($0) } ?? port
    default: break
    }
}

let kvod = try await KVOClient.connect(to: .init(host: host, port: port, clientName: "kvod-combine"))
for name in ["thermostat", "kitchen", "hall"] { _ = try? await kvod.delete(name) }
try await kvod.create("thermostat", values: ["temperature": 18.0, "target": 20.0] as JSONValue)
try await kvod.create("kitchen", values: ["temperature": 21.0] as JSONValue)
try await kvod.create("hall", values: ["temperature": 17.0] as JSONValue)

// combineLatest: each observation asks for its initial value, so the pair exists from the start.
print("-- combineLatest(temperature, target)")
let temperature = try await kvod.subscribe("temperature", of: "thermostat", options: [.initial, .new], as: Double.self)
let target = try await kvod.subscribe("target", of: "thermostat", options: [.initial, .new], as: Double.self)
let writer = Task {
    for reading in [19.0, 20.5, 21.0] { try await kvod.set("temperature", of: "thermostat", to: reading) }
    try await kvod.set("target", of: "thermostat", to: 22.0)
}
var pairs = 0
for try await (reading, wanted) in combineLatest(temperature, target) {
    guard let reading = reading.new, let wanted = wanted.new else { continue }
    print("temperature \(reading), target \(wanted): heat \(reading < wanted ? "on" : "off")")
    pairs += 1
    if reading == 21.0 && wanted == 22.0 { break }
}
try await writer.value

// merge: two rooms' changes in one loop.
print("-- merge(kitchen, hall)")
let kitchen = try await kvod.subscribe("temperature", of: "kitchen", options: [.new], as: Double.self)
let hall = try await kvod.subscribe("temperature", of: "hall", options: [.new], as: Double.self)
try await kvod.set("temperature", of: "kitchen", to: 22.0)
try await kvod.set("temperature", of: "hall", to: 17.5)
try await kvod.set("temperature", of: "kitchen", to: 22.5)
var merged = 0
for try await change in merge(kitchen, hall) {
    print("\(change.object) \(change.new ?? .nan) (rev \(change.rev))")
    merged += 1
    if merged == 3 { break }
}

// debounce: ten quick writes to the target; only the value that stays 200 ms comes out.
print("-- debounce(target, 200 ms)")
let targets = try await kvod.subscribe("target", of: "thermostat", options: [.new], as: Double.self)
let burst = Task {
    for step in 1...10 {
        try await kvod.set("target", of: "thermostat", to: 20.0 + Double(step) / 10)
        try await Task.sleep(for: .milliseconds(10))
    }
}
for try await change in targets.debounce(for: .milliseconds(200)) {
    print("target settled at \(change.new ?? .nan) (rev \(change.rev))")
    break
}
try await burst.value
kvod.close()
