import CNATS
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOJSON
import KVOModel
#endif

/// Signals between cluster nodes (docs/protocol.md, "Signals"; docs/design.md, "Signals"): a NATS core subject,
/// `kvod.<stream>.signal`, never the stream, so a signal takes no sequence, is stored by no NATS server and reaches
/// the nodes connected to NATS at that moment (at most once: a node cut off misses it, as a client cut off would).
///
/// - The loop thread hands each signal its node sent (`publish`) to a bounded queue (8 MiB; past it signals are
///   dropped and counted, never waited for); the relay's own thread publishes them (`natsConnection_Publish`, which
///   may wait on libnats's connection lock while it reconnects: never on the loop thread, and never behind the
///   bridge's appends, which may wait for the stream for ever).
/// - The NATS bridge's thread hands over its connection once connected (`attach`: the relay subscribes to the
///   subject there) and takes it back before closing it (`detach`); libnats's delivery thread posts each other
///   node's signal to the loop's inbox (`BridgeMessage.signal`), the loop delivers it to this node's observers.
///
/// A message is `{"node":N,"object":O,"value":V}` (compact JSON); a node skips its own (delivered when sent).
/// Like the bridge, the relay is never freed while libnats may call it back (one per server).
final class SignalRelay: @unchecked Sendable {
    /// Bytes of signals the queue holds at most.
    static let maximumQueuedBytes = 8 << 20

    let subject: String
    private let node: String
    private let inbox: BridgeInbox
    /// Guards `queue`, `queuedBytes`, `dropped` and `stopping` (the loop thread and the relay's).
    private let queueLock = ConditionLock()
    private var queue: [[UInt8]] = []
    private var queuedBytes = 0
    private var dropped = 0
    private var stopping = false
    /// Guards `connection` and `subscription` (the bridge's thread and the relay's): held while publishing, so the
    /// bridge never closes a connection the relay is using.
    private let connectionLock = ConditionLock()
    private var connection: OpaquePointer?
    private var subscription: OpaquePointer?
    private var thread = WorkerThread()
    private lazy var callbackContext = Unmanaged.passRetained(self).toOpaque()

    init(configuration: ClusterConfiguration, inbox: BridgeInbox) {
        subject = configuration.signalSubject
        node = configuration.node
        self.inbox = inbox
    }

    /// Loop thread.
    func start() {
        thread.start("the cluster's signal relay") { self.run() }
    }

    /// Loop thread: queues a signal for the other nodes; false when the queue is full and it was dropped.
    @discardableResult
    func publish(object: String, payload: CanonicalText) -> Bool {
        var message: [UInt8] = []
        message.reserveCapacity(payload.count + object.utf8.count + node.utf8.count + 40)
        message.append(contentsOf: Array(#"{"node":"#.utf8))
        JSONWriter.write(.string(node), into: &message)
        message.append(contentsOf: Array(#","object":"#.utf8))
        JSONWriter.write(.string(object), into: &message)
        message.append(contentsOf: Array(#","value":"#.utf8))
        message.append(contentsOf: payload.bytes)
        message.append(UInt8(ascii: "}"))
        var queued = false
        queueLock.signal {
            guard queuedBytes + message.count <= SignalRelay.maximumQueuedBytes else {
                dropped += 1
                return
            }
            queuedBytes += message.count
            queue.append(message)
            queued = true
        }
        return queued
    }

    /// The NATS bridge's thread, once connected: publishes through `connection` and subscribes to the subject.
    func attach(_ connection: OpaquePointer) {
        connectionLock.withLock {
            self.connection = connection
            var subscription: OpaquePointer?
            let status = natsConnection_Subscribe(&subscription, connection, subject, SignalRelay.receive, callbackContext)
            if status == NATS_OK { self.subscription = subscription } else {
                inbox.post(.log("cluster: cannot subscribe to the signal subject '\(subject)' (status \(status.rawValue)): other nodes' signals will not reach this node's observers", isError: true))
            }
        }
    }

    /// The NATS bridge's thread, before it closes the connection.
    func detach() {
        connectionLock.withLock {
            if let subscription {
                natsSubscription_Unsubscribe(subscription)
                natsSubscription_Destroy(subscription)
            }
            subscription = nil
            connection = nil
        }
    }

    /// Loop thread: stops the relay's thread, waiting until `deadline` (`WorkerThread.now()`); whether it ended.
    func stop(until deadline: UInt64) -> Bool {
        queueLock.signal { stopping = true }
        return thread.join(until: deadline)
    }

    private func run() {
        while let batch = nextBatch() {
            connectionLock.withLock {
                guard let connection else { return }
                for message in batch {
                    _ = message.withUnsafeBytes { natsConnection_Publish(connection, subject, $0.baseAddress, Int32($0.count)) }
                }
            }
            let lost = queueLock.withLock { () -> Int in
                defer { dropped = 0 }
                return dropped
            }
            if lost > 0 { inbox.post(.log("cluster: \(lost) signals dropped: more than \(SignalRelay.maximumQueuedBytes) bytes of them waited for NATS", isError: true)) }
        }
    }

    /// Everything queued, once there is something (nil once stopping).
    private func nextBatch() -> [[UInt8]]? {
        queueLock.wait(until: { !queue.isEmpty || stopping }) {
            if stopping { return nil }
            defer {
                queue = []
                queuedBytes = 0
            }
            return queue
        }
    }

    /// libnats's delivery thread: another node's signal, copied to the loop's inbox (this node's own are skipped by
    /// the loop, which delivered them when they were sent).
    private static let receive: natsMsgHandler = { _, _, message, closure in
        guard let message else { return }
        defer { natsMsg_Destroy(message) }
        let relay = Unmanaged<SignalRelay>.fromOpaque(closure!).takeUnretainedValue()
        let length = Int(natsMsg_GetDataLength(message))
        guard length > 0, let source = natsMsg_GetData(message) else { return }
        let data = Array(UnsafeRawBufferPointer(start: source, count: length))
        relay.inbox.post(.signal(data))
    }
}
