import CLibUV
import CNATS
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// The cluster's link to NATS JetStream, on threads of its own: never on the loop thread, whose only
/// contact with it is `enqueue(_:)` (a locked queue and a condition) and the `BridgeInbox` it posts to.
///
/// - Its thread connects (every server URL, 1 s pings, reconnecting for ever), makes sure the stream
///   exists (R3, file storage; created when missing), subscribes with an ordered consumer from the last
///   sequence the node applied (one entry early: the loop checks that it is the batch it applied there,
///   `StreamIntegrity`), then carries out jobs one at a time: appending a batch (`js_Publish` with the
///   batch id as message id; once sent, sent again with the same id until it is acknowledged, however long
///   that takes, so that a publisher's batches have no gap; JetStream's de-duplication makes a retried append
///   exactly-once within its window, 2 minutes by default, and the loop skips a later copy by its publisher
///   sequence), subscribing again from a given sequence, or reading the newest snapshot.
/// - The ordered consumer's messages arrive on libnats's own delivery thread; each is copied and posted
///   to the inbox with its stream sequence and its subscription's generation, in stream order; when the
///   consumer's name changes (libnats re-created it), that is posted first (`consumerChanged`).
///
/// `start`, `enqueue` and `stop` are for the loop thread; everything else runs on the bridge's threads.
/// The bridge object is never freed while libnats may still call it back: the references its callbacks
/// hold are never released (one bridge per server, so per process).
final class NATSBridge: @unchecked Sendable {
    private let configuration: ClusterConfiguration
    private let inbox: BridgeInbox
    /// Signals between the nodes share the connection (NATS core, not the stream): handed over once connected.
    private let signals: SignalRelay?
    /// The first stream sequence to deliver (the last applied, checked by the loop; 1 when none was).
    private let startSequence: UInt64
    private let lock = ConditionLock()
    /// Under `lock`.
    private var jobs: [Job] = []
    private var stopping = false
    /// The connection, for `stop` to close (the bridge thread still destroys it). Under `lock`.
    private var connectionToClose: OpaquePointer?
    private var thread = WorkerThread()

    // The bridge thread's alone.
    private var connection: OpaquePointer?
    private var jetStream: OpaquePointer?
    private var subscription: OpaquePointer?
    /// The stream's setting problems last logged (`StreamRequirements.check`).
    private var reportedStreamProblems: [StreamRequirements.Problem] = []
    /// What libnats's callbacks get: a reference to the bridge that is never released, since libnats may
    /// run a callback on its own threads even after the connection is destroyed. Bridge thread.
    private lazy var callbackContext = Unmanaged.passRetained(self).toOpaque()

    /// What the bridge's thread does next, in order.
    enum Job {
        case publish(PublishJob)
        /// Drop the subscription and subscribe again from this stream sequence; its deliveries carry this generation.
        case resubscribe(UInt64, generation: UInt64)
        /// Read the newest whole snapshot and post it (`snapshotFetched`).
        case fetchSnapshot
    }

    init(configuration: ClusterConfiguration, inbox: BridgeInbox, startSequence: UInt64, signals: SignalRelay? = nil) {
        self.configuration = configuration
        self.inbox = inbox
        self.signals = signals
        self.startSequence = max(startSequence, 1)
    }

    /// Loop thread: starts the bridge's thread.
    func start() {
        thread.start("the NATS bridge's thread") { self.run() }
    }

    /// Loop thread: queues a batch to append.
    func enqueue(_ job: PublishJob) {
        lock.signal { jobs.append(.publish(job)) }
    }

    /// Loop thread: queues a new subscription from `sequence`, whose deliveries carry `generation` (the
    /// first subscription's is 1); it replaces one still queued.
    func resubscribe(from sequence: UInt64, generation: UInt64) {
        lock.signal {
            jobs.removeAll { if case .resubscribe = $0 { true } else { false } }
            jobs.append(.resubscribe(max(sequence, 1), generation: generation))
        }
    }

    /// Loop thread: queues a read of the newest snapshot (posted as `snapshotFetched`).
    func fetchSnapshot() {
        lock.signal { jobs.append(.fetchSnapshot) }
    }

    /// Loop thread: stops the thread and closes the NATS connection, waiting for them until `deadline`
    /// (`WorkerThread.now()` nanoseconds) at the latest; whether the thread ended by then.
    ///
    /// Closing the connection ends at once a NATS call the thread is blocked in (a publish or stream look-up
    /// waiting up to 2 s for a server that is not there). But `natsConnection_Close` can block too: while
    /// libnats's reconnection thread tries a server, it holds the connection's lock until the server's INFO
    /// comes or the connect timeout (2 s) passes, which behind a partition is the timeout, again and again. So
    /// the close runs on a thread of its own, and a bridge thread not ended by the deadline is left to end on
    /// its own (it touches nothing of the server's but the inbox, invalidated by then): a node cut off from
    /// NATS stops within the deadline of SIGTERM (ClusterShutdownTests).
    func stop(until deadline: UInt64) -> Bool {
        lock.signal { stopping = true }
        var closer = WorkerThread()
        closer.start("the thread closing the NATS connection") {
            // Thread-safe, and under the lock: the bridge thread clears connectionToClose under it before it
            // destroys the connection.
            self.lock.withLock {
                if let connection = self.connectionToClose { natsConnection_Close(connection) }
            }
        }
        let stopped = thread.join(until: deadline)
        _ = closer.join(until: deadline)
        return stopped
    }

    private var isStopping: Bool {
        lock.withLock { stopping }
    }

    // MARK: - The bridge's thread

    private func run() {
        defer { tearDown() }
        guard connect() else { return }
        guard retry("the stream", { self.ensureStream() }) else { return }
        guard retry("the subscription", { self.subscribe(from: self.startSequence, generation: 1) }) else { return }
        inbox.post(.log("cluster: subscribed to stream '\(configuration.stream)' from sequence \(startSequence)", isError: false))
        while let job = nextJob() {
            switch job {
            case let .publish(batch): publish(batch)
            case let .resubscribe(sequence, generation):
                unsubscribe()
                guard retry("the subscription", { self.subscribe(from: sequence, generation: generation) }) else { return }
            case .fetchSnapshot:
                let (snapshot, problem) = SnapshotBootstrap.newest(configuration)
                inbox.post(.snapshotFetched(snapshot, problem: problem))
            }
        }
    }

    private func nextJob() -> Job? {
        lock.wait(until: { !jobs.isEmpty || stopping }) { stopping ? nil : jobs.removeFirst() }
    }

    /// Calls `step` every 250 ms until it returns nil (done) or the bridge stops; logs the first failure
    /// and every 20th after it.
    private func retry(_ what: String, _ step: () -> String?) -> Bool {
        var failures = 0
        while !isStopping {
            guard let failure = step() else {
                if failures > 0 { inbox.post(.log("cluster: \(what) is ready after \(failures) failed attempts", isError: false)) }
                return true
            }
            if failures % 20 == 0 { inbox.post(.log("cluster: \(what): \(failure); retrying", isError: true)) }
            failures += 1
            usleep(250_000)
        }
        return false
    }

    private func connect() -> Bool {
        var options: OpaquePointer?
        guard natsOptions_Create(&options) == NATS_OK, let options else {
            inbox.post(.log("cluster: cannot create the NATS options", isError: true))
            return false
        }
        defer { natsOptions_Destroy(options) }
        let urls = configuration.servers.map { strdup($0) }
        defer { urls.forEach { free($0) } }
        var pointers = urls.map { UnsafePointer<CChar>($0) }
        _ = pointers.withUnsafeMutableBufferPointer {
            natsOptions_SetServers(options, $0.baseAddress, Int32($0.count))
        }
        // A dead server is noticed within about two seconds (two pings unanswered), not two minutes.
        natsOptions_SetPingInterval(options, 1000)
        natsOptions_SetMaxPingsOut(options, 2)
        natsOptions_SetTimeout(options, 2000)
        natsOptions_SetMaxReconnect(options, -1)
        natsOptions_SetReconnectWait(options, 250)
        let context = callbackContext
        // With a connected callback the first connect is asynchronous: natsConnection_Connect returns
        // NATS_NOT_YET_CONNECTED at once when no server answers. Without one it would block until a
        // server answers (MaxReconnect -1: for ever), out of reach of `stop`.
        natsOptions_SetRetryOnFailedConnect(options, true, { _, closure in
            Unmanaged<NATSBridge>.fromOpaque(closure!).takeUnretainedValue()
                .inbox.post(.log("cluster: connected to NATS", isError: false))
        }, context)
        natsOptions_SetDisconnectedCB(options, { _, closure in
            Unmanaged<NATSBridge>.fromOpaque(closure!).takeUnretainedValue()
                .inbox.post(.log("cluster: lost the connection to NATS; reconnecting", isError: true))
        }, context)
        natsOptions_SetReconnectedCB(options, { _, closure in
            Unmanaged<NATSBridge>.fromOpaque(closure!).takeUnretainedValue()
                .inbox.post(.log("cluster: reconnected to NATS", isError: false))
        }, context)
        var connection: OpaquePointer?
        let status = natsConnection_Connect(&connection, options)
        guard status == NATS_OK || status == NATS_NOT_YET_CONNECTED, let connection else {
            inbox.post(.log("cluster: cannot connect to NATS: \(NATSBridge.text(status))", isError: true))
            return false
        }
        self.connection = connection
        let stopped = lock.withLock {
            connectionToClose = connection
            return stopping
        }
        // `stop` came while connecting: it found no connection to close.
        if stopped { return false }
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = 2000
        var jetStream: OpaquePointer?
        guard natsConnection_JetStream(&jetStream, connection, &jsOptions) == NATS_OK, let jetStream else {
            inbox.post(.log("cluster: cannot make a JetStream context", isError: true))
            return false
        }
        self.jetStream = jetStream
        signals?.attach(connection)
        return true
    }

    /// nil once the stream exists (found or created); else why not.
    private func ensureStream() -> String? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var error = jsErrCode(0)
        var status = js_GetStreamInfo(&info, jetStream, configuration.stream, nil, &error)
        if status == NATS_OK {
            jsStreamInfo_Destroy(info)
            // Its settings (docs/design.md, "The stream's settings"): a refusing problem keeps the node out of it.
            do throws(JetStreamSessionError) {
                let config = try JetStreamSession.streamConfiguration(configuration.stream, on: connection, timeoutMilliseconds: 2000)
                return StreamRequirements(configuration).check(config, reported: &reportedStreamProblems) { text, isError in
                    inbox.post(.log(text, isError: isError))
                }
            } catch {
                return "\(error)"
            }
        }
        guard status == NATS_NOT_FOUND else {
            // nats-server 2.10 and later answer a lookup this way while JetStream has no meta leader, as at a
            // cluster's first start with a server missing (2.9 answered "not found", then no peers on create).
            let hint = error == JSClusterNotAvailErr
                ? ": JetStream is not available in the NATS cluster yet; the stream needs \(configuration.replicas) NATS servers with JetStream in the cluster, up and routed"
                : ""
            return "cannot look the stream up: \(NATSBridge.text(status))\(error.rawValue == 0 ? "" : " (JetStream error \(error.rawValue)\(hint))")"
        }
        let requirements = StreamRequirements(configuration)
        (status, error) = JetStreamSession.addStream(configuration.stream, subject: configuration.subject, replicas: configuration.replicas,
                                                     duplicateWindow: requirements.duplicateWindow, to: jetStream)
        guard status == NATS_OK else {
            // The common case at a cluster's first start: not every NATS server is up yet (or one never came).
            let hint = error == JSClusterNoPeersErr
                ? ": no suitable peers for placement; the stream needs \(configuration.replicas) NATS servers with JetStream in the cluster"
                : ""
            return "cannot create the stream: \(NATSBridge.text(status)) (JetStream error \(error.rawValue)\(hint))"
        }
        inbox.post(.log("cluster: created stream '\(configuration.stream)' (\(configuration.replicas) replicas, file storage, duplicate window \(StreamRequirements.seconds(requirements.duplicateWindow)))", isError: false))
        return nil
    }

    /// The context one subscription's callbacks get: the bridge, the subscription's generation and the
    /// last consumer name it delivered from (touched by libnats's delivery thread for that subscription
    /// only). Released by libnats's completion callback, after the subscription's last delivery.
    private final class Delivery {
        let bridge: NATSBridge
        let generation: UInt64
        var consumer: [CChar] = []

        init(bridge: NATSBridge, generation: UInt64) {
            self.bridge = bridge
            self.generation = generation
        }
    }

    /// nil once subscribed (an ordered consumer from `sequence`, its deliveries tagged `generation`); else why not.
    private func subscribe(from sequence: UInt64, generation: UInt64) -> String? {
        var options = jsSubOptions()
        jsSubOptions_Init(&options)
        options.Ordered = true
        options.Config.DeliverPolicy = js_DeliverByStartSequence
        options.Config.OptStartSeq = sequence
        // Idle heartbeats every second (libnats's ordered consumers default to 5 s): a consumer lost with its
        // NATS server is noticed and re-created (from the next sequence) sooner.
        options.Config.Heartbeat = 1_000_000_000
        var error = jsErrCode(0)
        var subscription: OpaquePointer?
        let delivery = Unmanaged.passRetained(Delivery(bridge: self, generation: generation)).toOpaque()
        let status = configuration.stream.withCString { stream in
            options.Stream = stream
            return js_Subscribe(&subscription, jetStream, configuration.subject, NATSBridge.deliver,
                                delivery, nil, &options, &error)
        }
        guard status == NATS_OK, let subscription else {
            Unmanaged<Delivery>.fromOpaque(delivery).release()
            return "cannot subscribe: \(NATSBridge.text(status)) (JetStream error \(error.rawValue))"
        }
        // Released once libnats has delivered its last message (after `unsubscribe`); were that refused, the
        // context would stay (a few dozen bytes per subscription).
        _ = natsSubscription_SetOnCompleteCB(subscription, { closure in
            Unmanaged<Delivery>.fromOpaque(closure!).release()
        }, delivery)
        self.subscription = subscription
        return nil
    }

    private func unsubscribe() {
        guard let subscription else { return }
        natsSubscription_Unsubscribe(subscription)
        natsSubscription_Destroy(subscription)
        self.subscription = nil
    }

    /// libnats's delivery thread: copies the message and its stream sequence into the inbox, after a
    /// `consumerChanged` when its consumer is not the one of the message before.
    private static let deliver: natsMsgHandler = { _, _, message, closure in
        guard let message else { return }
        defer { natsMsg_Destroy(message) }
        let delivery = Unmanaged<Delivery>.fromOpaque(closure!).takeUnretainedValue()
        let bridge = delivery.bridge
        var meta: UnsafeMutablePointer<jsMsgMetaData>?
        guard natsMsg_GetMetaData(&meta, message) == NATS_OK, let meta else {
            bridge.inbox.post(.log("cluster: a stream message without metadata was ignored", isError: true))
            return
        }
        let sequence = meta.pointee.Sequence.Stream
        if let name = meta.pointee.Consumer {
            let length = strlen(name)
            let same = delivery.consumer.count == length && delivery.consumer.withUnsafeBufferPointer { memcmp($0.baseAddress!, name, length) == 0 }
            if !same {
                if !delivery.consumer.isEmpty {
                    bridge.inbox.post(.consumerChanged(generation: delivery.generation, sequence: sequence))
                }
                delivery.consumer = Array(UnsafeBufferPointer(start: name, count: length))
            }
        }
        jsMsgMetaData_Destroy(meta)
        let length = Int(natsMsg_GetDataLength(message))
        var data = [UInt8](repeating: 0, count: length)
        if length > 0, let source = natsMsg_GetData(message) {
            data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: source, count: length)) }
        }
        bridge.inbox.post(.entry(sequence: sequence, data: data, generation: delivery.generation))
    }

    /// Appends one batch: sent if its deadline has not passed, then sent again with the same message id
    /// until it is acknowledged (or the bridge stops), whatever the deadline: once sent it may be in the
    /// stream, and the publisher's next batch must not overtake it (its writers are answered `unavailable`
    /// at their deadline meanwhile, by the loop).
    private func publish(_ job: PublishJob) {
        var attempts = 0
        var lastFailure = "not attempted: the deadline had passed"
        while !isStopping {
            if attempts == 0 && uv_hrtime() >= job.deadline { break }
            var options = jsPubOptions()
            jsPubOptions_Init(&options)
            options.MaxWait = 2000
            var ack: UnsafeMutablePointer<jsPubAck>?
            var error = jsErrCode(0)
            attempts += 1
            let status = job.batch.withCString { id in
                options.MsgId = id
                return job.data.withUnsafeBytes { bytes in
                    js_Publish(&ack, jetStream, configuration.subject, bytes.baseAddress, Int32(bytes.count), &options, &error)
                }
            }
            if status == NATS_OK, let ack {
                let sequence = ack.pointee.Sequence
                jsPubAck_Destroy(ack)
                inbox.post(.published(batch: job.batch, sequence: sequence, attempts: attempts))
                return
            }
            lastFailure = "\(NATSBridge.text(status))\(error.rawValue != 0 ? " (JetStream error \(error.rawValue))" : "")"
            if attempts % 20 == 1 {
                inbox.post(.log("cluster: batch \(job.batch) not appended yet (attempt \(attempts)): \(lastFailure); sending it again until it is", isError: true))
            }
            // A refusal comes back at once (no responders while an election runs): do not spin.
            if status != NATS_TIMEOUT { usleep(50_000) }
        }
        if attempts == 0 { inbox.post(.publishFailed(batch: job.batch, reason: lastFailure, attempted: false)) }
    }

    private func tearDown() {
        unsubscribe()
        if let jetStream { jsCtx_Destroy(jetStream) }
        jetStream = nil
        if let connection {
            signals?.detach()
            lock.withLock { connectionToClose = nil }
            natsConnection_Close(connection)
            natsConnection_Destroy(connection)
        }
        connection = nil
    }

    private static func text(_ status: natsStatus) -> String {
        natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
    }
}
