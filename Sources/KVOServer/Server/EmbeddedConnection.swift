import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A connection to an in-process server for tests, as SwiftNIO's `EmbeddedChannel`: no listener, no TCP,
/// no port, no thread. The server's end is a real `Connection` (admitted as every accepted one is, with the
/// stages of `stack`) on one end of a Unix socket pair; the test holds the other end, writes request bytes
/// into it (`send`), runs the loop one non-blocking iteration at a time (`step`: read, dispatch, group
/// commit, flush), and reads what the server wrote (`takeOutput`, `takeLines`). Everything happens on the
/// calling thread, which is the server's loop thread: the server must not `run()` elsewhere.
///
/// Made by `Server.makeEmbeddedConnection(stack:)`; a server for it is configured with
/// `ServerConfiguration.isEmbedded` (no listener needed). Stop with `Server.stopEmbedded()`.
final class EmbeddedConnection {
    unowned let server: Server
    /// The server's side (it may have closed).
    let connection: Connection
    /// The test's end of the socket pair (non-blocking).
    private let descriptor: Int32
    /// Bytes read from the server and not yet taken as lines.
    private var received: [UInt8] = []
    private var isClosed = false

    fileprivate init(server: Server, connection: Connection, descriptor: Int32) {
        self.server = server
        self.connection = connection
        self.descriptor = descriptor
    }

    deinit { close() }

    /// Writes `bytes` to the server (they are read at the next `step`). Bytes to a server that closed its end are
    /// dropped (`MSG_NOSIGNAL`: no SIGPIPE ends the test process; `serverClosed` says what happened).
    func send(_ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count > 0 {
                offset += count
            } else if errno == EAGAIN {
                server.step()  // the server reads, making room
            } else {
                return
            }
        }
    }

    /// Writes `line` and a newline.
    func send(line: String) { send(Array(line.utf8) + [0x0A]) }

    /// Runs one loop iteration, then returns everything the server has written since the last call.
    func takeOutput() -> [UInt8] {
        server.step()
        readAvailable()
        defer { received.removeAll() }
        return received
    }

    /// Runs loop iterations until the server has written at least `count` complete lines (or `timeout`
    /// seconds passed: password checks run on libuv's thread pool), and returns the complete lines.
    func takeLines(atLeast count: Int = 1, timeout: Double = 10) -> [String] {
        let deadline = uv_hrtime() + UInt64(timeout * 1e9)
        var lines: [String] = []
        repeat {
            server.step()
            readAvailable()
            while let newline = received.firstIndex(of: 0x0A) {
                lines.append(String(decoding: received[..<newline], as: UTF8.self))
                received.removeSubrange(...newline)
            }
            if lines.count >= count { break }
            usleep(1000)
        } while uv_hrtime() < deadline
        return lines
    }

    /// Whether the server closed its end (after a `step`), with or without our last bytes read.
    var serverClosed: Bool {
        readAvailable()
        return isPeerClosed
    }

    private var isPeerClosed = false

    private func readAvailable() {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while !isClosed {
            let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                received += chunk[..<count]
            } else {
                // End of stream, or a reset: a server that closes its end with bytes of ours still unread resets
                // the pair (ECONNRESET), with no end of stream to read.
                if count == 0 || (errno != EAGAIN && errno != EINTR) { isPeerClosed = true }
                if count < 0 && errno == EINTR { continue }
                return
            }
        }
    }

    /// Closes the test's end (the server sees the client leave at its next `step`). Idempotent.
    func close() {
        guard !isClosed else { return }
        isClosed = true
        Glibc.close(descriptor)
    }
}

extension Server {
    /// A new in-process connection speaking `stack` (JSON lines by default), admitted as an accepted
    /// one is. Loop thread (the caller's: see `EmbeddedConnection`).
    func makeEmbeddedConnection(stack: TransportStack = .lines) -> EmbeddedConnection {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            fatalError("socketpair failed: \(String(cString: strerror(errno)))")
        }
        for descriptor in pair { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        let socket = allocateHandle(uv_pipe_t.self, kind: UV_NAMED_PIPE)
        uv_pipe_init(loop.raw, socket, 0)
        let status = uv_pipe_open(socket, pair[0])
        let connection = admit(asStream(socket), kind: .unix(path: "embedded"), stack: stack, acceptStatus: status)
        return EmbeddedConnection(server: self, connection: connection, descriptor: pair[1])
    }

    /// One non-blocking loop iteration (reads, requests, group commit, flush).
    func step() {
        uv_run(loop.raw, UV_RUN_NOWAIT)
    }

    /// Turns the server's manual clock (`ServerConfiguration.clock`, `ServerClock.manual()`) forward by `seconds` and
    /// runs what became due, as the housekeeping tick and the group commit's timer do on real time: expiries, the
    /// ends of presence graces, first-request, login and TLS-handshake deadlines, suppressed-log summaries, cluster
    /// write deadlines, and a held group commit; then one loop iteration. Never sleeps. Loop thread (the caller's).
    /// With a store and a group-commit interval, writes within the interval of the last commit wait (as on real time)
    /// until the clock is turned past it: a test of something else sets the interval to 0.
    func advanceTime(by seconds: Double) {
        precondition(seconds >= 0, "time does not run backwards")
        clock.advance(nanoseconds: UInt64(seconds * 1e9))
        housekeep()
        flushConnections()
        step()
    }

    /// Stops the server and runs its loop until every handle closed (as `run()` does after a stop).
    @discardableResult
    func stopEmbedded() -> ShutdownReport {
        stop()
        return run()
    }
}
