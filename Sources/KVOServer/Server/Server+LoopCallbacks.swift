import CLibUV
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The libuv callbacks the server's own handles run (check, idle, timer, async, signals).
/// Loop thread only, like the rest of `Server`.
extension Server {
    static let checkCallback: uv_check_cb = { handle in
        let server = owner(of: asHandle(handle!), as: Server.self)
        server.continueExpiryBacklog()
        server.replayHeldInput()
        server.flushConnections()
        server.iterationEnded()
    }

    /// A held group commit is due (`holdsGroupCommit`) and no input woke the loop first: commit and flush now.
    static let groupCommitCallback: uv_timer_cb = { handle in
        let server = owner(of: asHandle(handle!), as: Server.self)
        server.groupCommit.timerFired()
        server.flushConnections(holding: false)
    }

    /// Milliseconds between housekeeping ticks (Redis's `hz 10`).
    static let housekeepingInterval: UInt64 = 100

    static let housekeepingCallback: uv_timer_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).housekeep()
    }

    static let asyncCallback: uv_async_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).stop()
    }

    static let clusterCallback: uv_async_cb = { handle in
        owner(of: asHandle(handle!), as: Server.self).drainClusterInbox()
    }

    static let signalCallback: uv_signal_cb = { handle, signal in
        let server = owner(of: asHandle(handle!), as: Server.self)
        if signal == SIGHUP {
            server.reloadOnHangup()
            return
        }
        server.logger.info("received signal \(signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : String(signal))")
        server.stop()
    }
}
