// kvod-mirror: mirrors one kvod object into a Codable Swift type with KVOClient's RemoteObject and
// prints it each time it changes, until the object is deleted (or Ctrl-C).
//
//     swift run kvod-mirror [--host 127.0.0.1] [--port 7420] OBJECT
//
// The object is read as a `Person` (name, age, optional city): create one with
// `kvoclient create ada '{"name":"Ada","age":36}'` and change it with `kvoclient set ada age 37`.
import KVOClient
import Observation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the mirrored object decodes as: its top-level keys are what the mirror observes.
struct Person: Codable, Sendable {
    var name: String
    var age: Int
    var city: String?
}

var host = "127.0.0.1"
var port = 7420
var object: String?
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--host": host = arguments.popFirst() ?? host
    case "--port": port = arguments.popFirst().flatMap { Int($0) } ?? port
    default: object = argument
    }
}
guard let object else {
    print("usage: kvod-mirror [--host 127.0.0.1] [--port 7420] OBJECT")
    exit(2)
}

/// One line describing the mirror's state now (reading it registers the properties with the tracking).
@MainActor func describe(_ mirror: RemoteObject<Person>) -> String {
    if mirror.isDeleted { return "\(object) was deleted (rev \(mirror.rev))" }
    if let error = mirror.error { return "\(object): \(error)" }
    guard let person = mirror.value else { return "\(object): waiting for its keys" }
    return "rev \(mirror.rev): \(person.name), \(person.age)" + (person.city.map { ", lives in \($0)" } ?? "")
}

let kvod = try await KVOClient.connect(to: .init(host: host, port: port, clientName: "kvod-mirror"))
// Top-level code runs on the main actor: the mirror is updated there.
let mirror = try RemoteObject(kvod, object, as: Person.self)
print("mirroring \(object) (keys \(mirror.keys.joined(separator: ", ")))")

// Print, then wait for the next change of anything printed (withObservationTracking fires once per
// registration, so register again after each change).
let (changes, changed) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
var last = ""
repeat {
    let line = withObservationTracking { describe(mirror) } onChange: { changed.yield() }
    if line != last { print(line) }
    last = line
    if mirror.isDeleted || mirror.error?.code == .notFound { break }
} while await changes.first(where: { _ in true }) != nil
kvod.close()
