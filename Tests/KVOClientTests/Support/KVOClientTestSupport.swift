import Foundation
import KVOClient
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Helpers for the KVOClient tests: connecting to a test kvod, and counting a server's observers from an
/// independent connection (KVOWireProbe's blocking `KVOConnection`) without blocking the test's task for long.
extension KVODProcess {
    /// A configuration for this kvod's plaintext port, with test-friendly reconnection delays.
    func clientConfiguration(reconnection: KVOClient.ReconnectionPolicy? = .init(initialDelay: 0.05, maximumDelay: 0.5)) -> KVOClient.Configuration {
        KVOClient.Configuration(host: "127.0.0.1", port: port, clientName: "tests", reconnection: reconnection)
    }

    /// A new `KVOClient` to this kvod.
    func client() async throws -> KVOClient {
        try await KVOClient.connect(to: clientConfiguration())
    }
}

/// Polls `info` on `connection` until `object` has `count` observers; records an issue after `timeout` seconds.
/// The default is long because it is a bound, not a speed: under ThreadSanitizer on a loaded machine, 1,000
/// `unobserve`s sent behind a connection's full output buffer (kvod reads no more requests from a connection
/// until its queued output drains) took 11 s to be served; a leak never reaches `count`.
@discardableResult
func eventuallyObservers(_ connection: KVOConnection, _ object: String, count: Int, timeout: Double = 60,
                         sourceLocation: SourceLocation = #_sourceLocation) async throws -> Int {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        let observers = try connection.call("info", ["object": .string(object)])["observers"]?.arrayValue ?? []
        if observers.count == count { return count }
        if Date() > deadline {
            Issue.record("\(object) has \(observers.count) observers, expected \(count)", sourceLocation: sourceLocation)
            return observers.count
        }
        try await Task.sleep(nanoseconds: 10_000_000)
    }
}

/// The error `body` throws as a `KVODError`, or nil (recording an issue) when it succeeds or throws something else.
func kvodError(_ sourceLocation: SourceLocation = #_sourceLocation, _ body: () async throws -> Void) async -> KVODError? {
    do {
        try await body()
        Issue.record("expected a KVODError, got success", sourceLocation: sourceLocation)
        return nil
    } catch let error as KVODError {
        return error
    } catch {
        Issue.record("expected a KVODError, got \(error)", sourceLocation: sourceLocation)
        return nil
    }
}
