import Foundation

@testable import KVOServer

/// A server run in-process on a thread of its own, for tests that talk to it over loopback: made on the
/// test's thread (so that its port is known), then handed to its thread, which owns it until `run()`
/// returns. `stop()` asks it to stop, waits, and hands the server back with its report, after which the test's
/// thread may read it (its engine, its metrics). `@unchecked Sendable`: the hand-offs are ordered by the
/// thread's start and by `condition`.
final class ServerThread: @unchecked Sendable {
    /// The plaintext listener's port.
    let port: Int
    private let server: Server
    private let stopHandle: StopHandle
    private let condition = NSCondition()
    private var report: ShutdownReport?

    init(_ configuration: ServerConfiguration) throws {
        var configuration = configuration
        if configuration.port == 7420 { configuration.port = 0 }
        server = try Server(configuration: configuration)
        port = server.port
        stopHandle = server.stopHandle
        Thread { [self] in
            let report = server.run()
            condition.lock()
            self.report = report
            condition.signal()
            condition.unlock()
        }.start()
    }

    deinit { stopHandle.requestStop() }

    /// Stops the server and waits up to `timeout` seconds: the server, this thread's again, and its report;
    /// nil when it did not stop in time.
    func stop(timeout: Double = 10) -> (server: Server, report: ShutdownReport)? {
        stopHandle.requestStop()
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while report == nil, condition.wait(until: deadline) {}
        return report.map { (server, $0) }
    }
}
