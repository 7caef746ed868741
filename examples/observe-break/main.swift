// Top-level code, as a script or the README's first example has it: a loop that breaks out of an
// observation. The test (KVOClientScopedObservationTests) runs it against a kvod on the port given as the
// first argument; after each form it prints a line and waits for one on stdin, so that the test can ask
// kvod with `info` whether the observer is still there while this program still runs.
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KVOClient

func pause(after form: String) {
    print(form)
    fflush(nil)   // every output stream (`stdout` is a C global Swift 6 will not touch)
    _ = readLine()
}

let port = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 7420
let kvod = try await KVOClient.connect(to: .init(host: "127.0.0.1", port: port))

// The README's first example: the observation ends when the closure returns.
try await kvod.withObservation("date", of: "clock", options: [.initial, .new, .old], as: String.self) { changes in
    for try await change in changes {
        print(change.reason, change.old as Any, change.new as Any, change.rev)
        break
    }
}
pause(after: "withObservation")

// The sequence's cancel() after the loop.
let clock = kvod.observe("date", of: "clock", options: [.initial, .new], as: String.self)
for try await change in clock {
    print(change.reason, change.new as Any, change.rev)
    break
}
clock.cancel()
pause(after: "cancel")

// A plain loop: in top-level code the compiler keeps its iterator until the program ends.
for try await change in kvod.observe("date", of: "clock", options: [.initial, .new], as: String.self) {
    print(change.reason, change.new as Any, change.rev)
    break
}
pause(after: "plain")
