import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Publishes this node's snapshots to the snapshot stream and trims behind them, on a thread of its own
/// with its own NATS connection (a snapshot's megabytes never delay the bridge's batches).
///
/// The loop captures a `ClusterSnapshot` after applying each stream sequence that is a multiple of
/// `--cluster-snapshot-every` and hands it over with `enqueue` (only the newest waiting one is kept). This
/// thread encodes it, cuts it into chunks and appends them (`SnapshotChunk.messageID`: the other nodes'
/// copies of the same snapshot are dropped by JetStream as duplicates), each retried for up to 30 s. Once
/// every chunk of snapshot S is appended, and this node had completed an earlier snapshot P before it,
/// it trims: the snapshot stream below P's first chunk it knows of (not at all when it knows none: its
/// appends were all duplicates acknowledged before the first copy was replicated, sequence 0), and the
/// log stream below P + 1. Purging a chunk of P early is harmless: S is whole by then. The stream thus
/// always keeps the entries after the second-newest snapshot this node completed (at least
/// `snapshotEvery` entries, so a node a little behind still replays instead of bootstrapping), and the
/// snapshot stream the snapshots from P on. Every node trims alike; purges are idempotent. A node that
/// finds a newer snapshot already last in the snapshot stream publishes nothing (the nodes ahead have),
/// so that a late copy of an old snapshot never purges newer ones.
///
/// `start`, `enqueue` and `stop` are for the loop thread; the rest runs on the publisher's thread.
final class SnapshotPublisher: @unchecked Sendable {
    private let configuration: ClusterConfiguration
    private let inbox: BridgeInbox
    private let lock = ConditionLock()
    /// Under `lock`.
    private var waiting: ClusterSnapshot?
    private var stopping = false
    private var thread = WorkerThread()

    // The publisher thread's alone.
    private var session: JetStreamSession?
    /// The last snapshot this node completed: its sequence and the lowest snapshot stream sequence of its
    /// chunks that this node learnt (nil when every append was acknowledged as an in-flight duplicate).
    private var previous: (sequence: UInt64, firstChunk: UInt64?)?

    init(configuration: ClusterConfiguration, inbox: BridgeInbox) {
        self.configuration = configuration
        self.inbox = inbox
    }

    /// Loop thread: starts the thread.
    func start() {
        thread.start("the snapshot publisher's thread") { self.run() }
    }

    /// Loop thread: a snapshot to publish; replaces one still waiting (the newer one makes it useless).
    func enqueue(_ snapshot: ClusterSnapshot) {
        lock.signal { waiting = snapshot }
    }

    /// Loop thread: stops the thread after the NATS call it is in, waiting for it until `deadline`
    /// (`WorkerThread.now()` nanoseconds) at the latest; whether it ended by then. A call waits up to 2 s for a
    /// NATS server that does not answer, and closing the session can wait as long (`NATSBridge.stop(until:)`):
    /// a thread not ended by the deadline is left to end on its own (it touches nothing of the server's but the
    /// inbox, invalidated by then, and the snapshot handed to it).
    func stop(until deadline: UInt64) -> Bool {
        lock.signal { stopping = true }
        return thread.join(until: deadline)
    }

    private var isStopping: Bool {
        lock.withLock { stopping }
    }

    private func run() {
        while let snapshot = nextSnapshot() {
            publish(snapshot)
        }
        session?.close()
        session = nil
    }

    private func nextSnapshot() -> ClusterSnapshot? {
        lock.wait(until: { waiting != nil || stopping }) {
            if stopping { return nil }
            defer { waiting = nil }
            return waiting
        }
    }

    /// The connection, made (and the snapshot stream created) on first use.
    private func connectedSession() throws(JetStreamSessionError) -> JetStreamSession {
        if let session { return session }
        let made = try JetStreamSession(servers: configuration.servers, timeoutMilliseconds: 2000, persistent: true)
        try made.ensureStream(configuration.snapshotStream, subject: configuration.snapshotSubject, replicas: configuration.replicas)
        session = made
        return made
    }

    private func publish(_ snapshot: ClusterSnapshot) {
        // A node behind another that already appended a newer snapshot leaves this one (and trimming) to the
        // nodes ahead: a late copy of an old snapshot must not purge the newer ones appended before it.
        if let last = try? connectedSession().lastMessage(configuration.snapshotStream, subject: configuration.snapshotSubject),
           let chunk = try? SnapshotChunk.decode(last), chunk.sequence > snapshot.sequence {
            previous = nil
            return
        }
        let bytes = snapshot.encoded()
        let chunks = SnapshotChunk.split(bytes, of: snapshot)
        var firstChunk = UInt64.max
        let deadline = uv_hrtime() &+ 30_000_000_000
        for chunk in chunks {
            let message = chunk.encoded()
            var lastFailure = ""
            var appended: UInt64?
            while appended == nil, !isStopping, uv_hrtime() < deadline {
                do throws(JetStreamSessionError) {
                    appended = try connectedSession().publish(configuration.snapshotSubject, message, messageID: chunk.messageID,
                                                              maxWaitMilliseconds: 2000)
                } catch {
                    lastFailure = error.description
                    usleep(100_000)
                }
            }
            guard let appended else {
                if !isStopping {
                    inbox.post(.log("cluster: the snapshot of stream sequence \(snapshot.sequence) was not published (chunk \(chunk.index) of \(chunks.count): \(lastFailure)); the next one may be", isError: true))
                }
                return
            }
            // 0: a duplicate of a copy another node is appending right now; its place is unknown here.
            if appended > 0 { firstChunk = min(firstChunk, appended) }
        }
        inbox.post(.log("cluster: published the snapshot of stream sequence \(snapshot.sequence) (revision \(snapshot.revision), \(bytes.count) bytes in \(chunks.count) chunk\(chunks.count == 1 ? "" : "s"))", isError: false))
        if let previous, previous.sequence < snapshot.sequence {
            do throws(JetStreamSessionError) {
                let session = try connectedSession()
                // Never purge below an unknown place.
                if let firstChunk = previous.firstChunk { try session.purge(configuration.snapshotStream, below: firstChunk) }
                try session.purge(configuration.stream, below: previous.sequence + 1)
                inbox.post(.log("cluster: trimmed stream '\(configuration.stream)' below sequence \(previous.sequence + 1) and the snapshots before that of sequence \(previous.sequence)", isError: false))
            } catch {
                inbox.post(.log("cluster: trimming behind the snapshot of sequence \(previous.sequence) failed: \(error)", isError: true))
            }
        }
        previous = (snapshot.sequence, firstChunk == .max ? nil : firstChunk)
    }
}
