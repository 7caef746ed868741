import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The server in-process: run its loop on a thread, talk to it over loopback, stop it, and check
/// that every libuv handle was closed (`uv_loop_close` returned 0).
@Suite struct ServerLifecycleTests {
    /// Runs a server on its own thread until `body` returns, then stops it and returns the report.
    private func withRunningServer(_ configure: (inout ServerConfiguration) -> Void = { _ in },
                                   _ body: (Int) throws -> Void) throws -> ShutdownReport {
        var configuration = ServerConfiguration()
        configuration.port = 0
        configure(&configuration)
        let running = try ServerThread(configuration)
        try body(running.port)
        return try #require(running.stop(), "the server did not stop").report
    }

    @Test func stoppingWithLiveConnectionsAndSubscriptionsClosesEveryHandle() throws {
        var clients: [LoopbackClient] = []
        let report = try withRunningServer { port in
            let writer = try LoopbackClient(port: port)
            try writer.call("create", ["object": "o", "values": ["v": 0]])
            for _ in 0..<10 {
                let client = try LoopbackClient(port: port)
                try client.call("observe", ["object": "o", "keyPath": "v", "options": ["new", "old"]])
                clients.append(client)
            }
            // Leave unread events queued and a half-sent line behind.
            for value in 1...50 { try writer.call("set", ["object": "o", "keyPath": "v", "value": .int(Int64(value))]) }
            try writer.send(raw: Array(#"{"op":"ping""#.utf8))
            clients.append(writer)
        }
        #expect(report.loopClosedCleanly)
        #expect(report.leakedHandles.isEmpty)
    }

    @Test func stoppingAnIdleServerClosesEveryHandle() throws {
        let report = try withRunningServer { _ in }
        #expect(report.loopClosedCleanly)
    }

    @Test func aSecondStopRequestIsHarmless() throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        let server = try Server(configuration: configuration)
        let stop = server.stopHandle
        stop.requestStop()
        stop.requestStop()
        let report = server.run()
        #expect(report.loopClosedCleanly)
        stop.requestStop()  // after the handle is gone: a no-op, not a use after free
    }

    @Test func bindingAPortInUseFailsCleanly() throws {
        var configuration = ServerConfiguration()
        configuration.port = 0
        let first = try Server(configuration: configuration)
        configuration.port = first.port
        #expect(performing: { _ = try Server(configuration: configuration) }, throws: { error in
            guard case .transport = error as? ServerStartError else { return false }
            return "\(error)".contains("EADDRINUSE")
        })
        first.stopHandle.requestStop()
        #expect(first.run().loopClosedCleanly)
    }
}
