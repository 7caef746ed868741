import Foundation
import KVOJSON
import Testing

@testable import KVOServer

/// `status` in-process with a manual clock (`ServerClock.manual()`): its uptime and start are the server's clock's,
/// to the millisecond, never the wall clock read directly; a server without a data directory reports its store as
/// memory without file sizes; a server made without the daemon has no settings for `config`.
@Suite struct StatusReportTests {
    @Test("uptime is counted on the server's clock: it moves exactly as the clock is turned, and only then")
    func uptimeOnTheServerClock() throws {
        let clock = ServerClock.manual()
        let started = clock.wallMilliseconds
        let server = try EmbeddedServer.make(clock: clock)
        let admin = server.makeEmbeddedConnection()
        let first = try admin.call(#"{"op":"status"}"#)
        expectEqual(first["uptimeSeconds"]?.doubleValue, 0, "\(first)")
        expectEqual(first["started"], .int(started))
        Thread.sleep(forTimeInterval: 0.05)
        expectEqual(try admin.call(#"{"op":"status"}"#)["uptimeSeconds"]?.doubleValue, 0, "real time passing does not move it")
        server.advanceTime(by: 90.5)
        let later = try admin.call(#"{"op":"status"}"#)
        expectEqual(later["uptimeSeconds"]?.doubleValue, 90.5, "\(later)")
        expectEqual(later["started"], .int(started))
        expectEqual(later["storage"], ["kind": "memory", "state": "writable"], "\(later)")
        #expect(later["alarms"] == [] && later["cluster"] == .null)
        expectEqual(try admin.call(#"{"op":"config"}"#)["settings"], [], "no daemon, no settings")
        #expect(server.stopEmbedded().loopClosedCleanly)
    }
}
