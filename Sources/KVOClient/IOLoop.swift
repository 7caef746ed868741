#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import KVOJSON

/// The client's I/O thread: connects (and reconnects with backoff), reads and parses lines, matches
/// replies to requests by id, routes change events to observations by `sub` in batches, writes TLS
/// output, sends the heartbeat and expires requests.
///
/// Owned by the thread running `run()` and used by it alone (its properties are never touched from
/// elsewhere); it talks to everything else through `ClientCore`.
final class IOLoop: @unchecked Sendable {
    // @unchecked: handed once to the thread `IOThread.start` makes, and used by that thread only.
    private let core: ClientCore
    private let configuration: KVOClient.Configuration
    /// Where each `sub` of the current connection goes.
    private var routes: [Int64: ObservationCore] = [:]
    private var descriptor: Int32 = -1
    private var tls: TLSClientSession?
    /// A line begun in an earlier read.
    private var partialLine: [UInt8] = []
    private var lastReceived = 0.0
    private var pingSentAt: Double?
    /// The server sent `{"event":"heartbeat"}` (its connection to us was quiet for half its `--idle-timeout`):
    /// answered with a heartbeat `ping` once the read is dispatched, unless one is out already.
    private var heartbeatAsked = false
    private var lastExpiry = 0.0
    /// Events parsed since the last reply, per observation, delivered together.
    private var batchObservation: ObservationCore?
    private var batchSub: Int64 = 0
    private var batch: [ChangeEvent] = []

    /// The top-level keys of replies and events, matched without building strings.
    private static let keys = JSONParser.KeyTable(
        ["event", "sub", "id", "ok", "error", "reason", "rev", "change", "object", "s", "r", "t", "w", "p", "2", "3", "4", "n", "o", "cause", "x"])

    init(core: ClientCore) {
        self.core = core
        configuration = core.configuration
    }

    /// Failed attempts since the last successful handshake: the backoff grows until one succeeds (a
    /// refused login is retried ever more slowly, not every `initialDelay`).
    private var attempt = 0

    /// Runs until the client is closed (or the first connection fails, or reconnection is off).
    func run() {
        while !core.isClosed {
            do throws(KVODError) {
                try connect()
            } catch {
                if core.isFirstConnection {
                    core.failStart(error)
                    return
                }
                core.announce(.disconnected(reason: error.description))
                attempt += 1
                guard let policy = configuration.reconnection else { core.close(); return }
                core.announce(.reconnecting(attempt: attempt))
                sleep(policy.delay(beforeAttempt: attempt))
                continue
            }
            let reason = readUntilLost()
            let wasConnected = !core.isFirstConnection
            teardown(reason: reason)
            if core.isClosed { break }
            if !wasConnected {
                core.failStart(.cannotConnect(host: configuration.host, port: configuration.port, reason: reason))
                return
            }
            core.announce(.disconnected(reason: reason))
            guard let policy = configuration.reconnection else {
                core.close()
                return
            }
            attempt += 1
            core.announce(.reconnecting(attempt: attempt))
            sleep(policy.delay(beforeAttempt: attempt))
        }
    }

    /// One connection attempt: TCP, TLS, then the handshake and resubscriptions are queued.
    private func connect() throws(KVODError) {
        let descriptor = try Socket.connect(host: configuration.host, port: configuration.port,
                                            timeout: configuration.connectTimeout)
        if let options = configuration.tls {
            setTimeouts(descriptor, seconds: configuration.connectTimeout)
            do throws(TLSSessionError) {
                tls = try TLSClientSession(descriptor: descriptor, host: configuration.host, options: options)
            } catch {
                Socket.closeDescriptor(descriptor)
                switch error {
                case .closed: throw .cannotConnect(host: configuration.host, port: configuration.port, reason: "the server closed the connection during the TLS handshake")
                case let .io(reason): throw .cannotConnect(host: configuration.host, port: configuration.port, reason: reason)
                case let .tls(reason): throw .tls(reason)
                }
            }
            setTimeouts(descriptor, seconds: 0)
        }
        self.descriptor = descriptor
        partialLine = []
        lastReceived = Socket.now()
        pingSentAt = nil
        _ = core.install(descriptor: descriptor, isTLS: tls != nil)
        for observation in core.liveObservations() {
            if let (resumeFrom, resuming) = observation.prepareSubscription() {
                core.sendObserve(for: observation, resumeFrom: resumeFrom, resuming: resuming)
            }
        }
        core.flush()
    }

    private func setTimeouts(_ descriptor: Int32, seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: .init((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    private func teardown(reason: String) {
        flushBatch()
        routes = [:]
        tls = nil
        descriptor = -1
        core.connectionLost(reason: reason)
    }

    /// Sleeps `seconds`, waking early when the client is closed; requests held for the next connection
    /// still time out meanwhile (checked every 0.25 s, as while connected).
    private func sleep(_ seconds: Double) {
        let deadline = Socket.now() + seconds
        while !core.isClosed {
            let now = Socket.now()
            core.expireRequests(now: now)
            let remaining = deadline - now
            if remaining <= 0 { return }
            var entry = pollfd(fd: core.wakeDescriptor, events: Int16(POLLIN), revents: 0)
            _ = poll(&entry, 1, Int32(min(remaining, 0.25) * 1000) + 1)
            drainWakePipe()
        }
    }

    private func drainWakePipe() {
        var scratch = [UInt8](repeating: 0, count: 64)
        while read(core.wakeDescriptor, &scratch, scratch.count) > 0 {}
        core.clearWoken()
    }

    /// Reads and dispatches until the connection is lost or the client closed; returns why.
    private func readUntilLost() -> String {
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            if core.isClosed { return "closed" }
            if let tls, let bytes = core.takeOutputForTLS() {
                let result = bytes.withUnsafeBytes { raw in Result { () throws(TLSSessionError) in try tls.write(raw) } }
                if case let .failure(error) = result { return describe(error) }
            }
            let now = Socket.now()
            if now - lastExpiry >= 0.25 {
                lastExpiry = now
                core.expireRequests(now: now)
            }
            // An expired heartbeat ends the connection only once a poll finds nothing to read: a client whose
            // thread was not scheduled for a while (a loaded machine, a laptop waking) reads the pong first.
            var heartbeatExpired = false
            if let sent = pingSentAt {
                heartbeatExpired = now - sent > configuration.heartbeatTimeout
            } else if now - lastReceived > configuration.heartbeatInterval {
                pingSentAt = now
                core.enqueue("ping", [:], isWrite: false, purpose: .heartbeat)
            }
            var readable = false
            if let tls, tls.bufferedByteCount > 0 {
                readable = true
            } else {
                let wantsOutput = core.hasPlaintextBacklog
                var entries = [
                    pollfd(fd: descriptor, events: Int16(POLLIN) | (wantsOutput ? Int16(POLLOUT) : 0), revents: 0),
                    pollfd(fd: core.wakeDescriptor, events: Int16(POLLIN), revents: 0),
                ]
                let heartbeatDue = pingSentAt.map { $0 + configuration.heartbeatTimeout }
                    ?? lastReceived + configuration.heartbeatInterval
                let wait = heartbeatExpired ? 0 : Int32(min(max(heartbeatDue - now, 0.001), 0.25) * 1000) + 1
                let ready = poll(&entries, 2, wait)
                if ready < 0 {
                    if errno == EINTR { continue }
                    return "poll failed: \(String(cString: strerror(errno)))"
                }
                if entries[1].revents != 0 {
                    drainWakePipe()
                    core.flush()
                }
                if entries[0].revents & Int16(POLLOUT) != 0 { core.flush() }
                readable = entries[0].revents & (Int16(POLLIN) | Int16(POLLHUP) | Int16(POLLERR)) != 0
            }
            if !readable && heartbeatExpired {
                return ConnectionState.heartbeatTimeoutReason(after: configuration.heartbeatTimeout)
            }
            guard readable else { continue }
            let count: Int
            if let tls {
                let result = chunk.withUnsafeMutableBytes { raw in Result { () throws(TLSSessionError) in try tls.read(into: raw) } }
                switch result {
                case let .success(read): count = read
                case let .failure(error): return describe(error)
                }
            } else {
                let read = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                if read < 0 {
                    if errno == EINTR || errno == EAGAIN { continue }
                    return "read failed: \(String(cString: strerror(errno)))"
                }
                count = read
            }
            if count == 0 { return "the server closed the connection" }
            lastReceived = Socket.now()
            pingSentAt = nil
            core.beginDispatch()
            let loss = consume(chunk, count: count)
            if heartbeatAsked, loss == nil {
                // Any line keeps the connection (docs/protocol.md, "Idle connections and heartbeats"): a ping,
                // whose answer also tells that the server is there.
                pingSentAt = lastReceived
                core.enqueue("ping", [:], isWrite: false, purpose: .heartbeat)
            }
            heartbeatAsked = false
            core.endDispatch()
            if let loss { return loss }
        }
    }

    private func describe(_ error: TLSSessionError) -> String {
        switch error {
        case .closed: return "the server closed the connection"
        case let .io(reason): return "socket error: \(reason)"
        case let .tls(reason): return "TLS: \(reason)"
        }
    }

    /// Splits received bytes into lines and dispatches each; returns a reason when the connection must end.
    private func consume(_ chunk: [UInt8], count: Int) -> String? {
        var loss: String?
        chunk.withUnsafeBufferPointer { buffer in
            var start = 0
            while start < count {
                guard let newline = buffer[start..<count].firstIndex(of: 0x0A) else {
                    partialLine.append(contentsOf: buffer[start..<count])
                    break
                }
                if partialLine.isEmpty {
                    loss = dispatch(UnsafeBufferPointer(rebasing: buffer[start..<newline]))
                } else {
                    partialLine.append(contentsOf: buffer[start..<newline])
                    let line = partialLine
                    partialLine = []
                    loss = line.withUnsafeBufferPointer { dispatch($0) }
                }
                start = newline + 1
                if loss != nil { return }
            }
        }
        flushBatch()
        return loss
    }

    /// Handles one line: a change event (batched for its observation) or a reply.
    private func dispatch(_ raw: UnsafeBufferPointer<UInt8>) -> String? {
        var line = raw
        if line.last == 0x0D { line = UnsafeBufferPointer(rebasing: line.dropLast()) }
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
        let parsed: [JSONParser.Member]?
        do throws(JSONParseError) {
            parsed = try JSONParser.parseMembers(line, keys: IOLoop.keys)
        } catch {
            return "the server sent a line that is not JSON (\(error))"
        }
        guard let members = parsed else { return "the server sent a line that is not a JSON object" }
        var event: String?
        var sub: Int64?
        var id: Int64?
        var ok = false
        var error: JSONValue?
        var reason: String?
        var rev: Int64 = 0
        var change: JSONValue?
        var isCompact = false
        var compactReason: String?
        var compactKind = 1
        var compactIndexes: JSONValue?
        var compactIsPrior = false
        var compactNew: JSONValue?
        var compactOld: JSONValue?
        var object: String?
        var cause: String?
        for member in members {
            switch member.key {
            case "event": event = member.value.stringValue
            case "sub": sub = member.value.intValue
            case "id": id = member.value.intValue
            case "ok": ok = member.value == .bool(true)
            case "error": error = member.value
            case "reason": reason = member.value.stringValue
            case "rev": rev = member.value.intValue ?? 0
            case "change": change = member.value
            case "object", "t": object = member.value.stringValue
            case "cause": cause = member.value.stringValue
            // Compact: an ending because the object's time to live ended.
            case "x": if member.value == .int(1) { cause = "expired" }
            // A compact event (docs/protocol.md, "Compact events"): the same change, one-letter members.
            case "s": sub = member.value.intValue; isCompact = true
            case "r": rev = member.value.intValue ?? 0
            case "w": compactReason = member.value.stringValue
            case "p":
                // A prior notification: `1` (valueChanged) or the reason's code.
                compactIsPrior = true
                if let code = member.value.stringValue { compactReason = code }
            case "2", "3", "4":
                // Kinds 2-4: the indexes under the member named by the kind.
                compactKind = Int(member.key) ?? 1
                compactIndexes = member.value
            case "n": compactNew = member.value
            case "o": compactOld = member.value
            default: break
            }
        }
        if isCompact, event == nil, id == nil {
            guard let sub, let observation = routes[sub] else { return nil }
            let indexes = compactIndexes?.arrayValue?.compactMap { $0.intValue.map(Int.init) } ?? []
            let changeEvent = ChangeEvent(
                reason: compactReason.map(ChangeReason.init(compactCode:)) ?? .valueChanged, kind: compactKind, rev: rev,
                old: compactOld, new: compactNew, indexes: indexes, isPrior: compactIsPrior, change: nil, object: object,
                cause: cause)
            enqueue(changeEvent, for: observation, sub: sub)
            return nil
        }
        if let event {
            if event == "heartbeat" { heartbeatAsked = true }
            guard event == "change", let sub, let observation = routes[sub] else { return nil }
            let indexes = change?["indexes"]?.arrayValue?.compactMap { $0.intValue.map(Int.init) } ?? []
            let changeEvent = ChangeEvent(
                reason: ChangeReason(wireName: reason ?? "valueChanged"), kind: Int(change?["kind"]?.intValue ?? 1),
                rev: rev, old: change?["old"], new: change?["new"], indexes: indexes,
                isPrior: change?["notificationIsPrior"] == .bool(true), change: change, object: object, cause: cause)
            enqueue(changeEvent, for: observation, sub: sub)
            return nil
        }
        // Replies come after the events they caused: deliver those first.
        flushBatch()
        guard let id else {
            if let code = error?["code"]?.stringValue, code == "too_many_connections" {
                return "the server refused the connection: too many connections"
            }
            if let code = error?["code"]?.stringValue, code == "closed" {
                return "the server closed the connection: \(error?["message"]?.stringValue ?? "closed")"
            }
            return nil
        }
        guard let request = core.takePending(id) else { return nil }
        var fields: [String: JSONValue] = [:]
        for member in members where member.key != "id" && member.key != "ok" { fields[member.key] = member.value }
        return handleReply(request, ok: ok, fields: fields)
    }

    /// Adds `event` to the batch for `observation`, handing over the batch of another one first.
    private func enqueue(_ event: ChangeEvent, for observation: ObservationCore, sub: Int64) {
        if batchObservation !== observation {
            flushBatch()
            batchObservation = observation
            batchSub = sub
        }
        batch.append(event)
    }

    /// Hands the batched events to their observation.
    private func flushBatch() {
        guard let observation = batchObservation else { return }
        let events = batch
        batch = []
        batchObservation = nil
        if observation.deliver(events) { routes[batchSub] = nil }
    }

    private func handleReply(_ request: ClientCore.Pending, ok: Bool, fields: [String: JSONValue]) -> String? {
        let failure = ok ? nil : KVODError.fromReply(fields["error"])
        switch request.purpose {
        case let .caller(continuation):
            if let failure { continuation.resume(throwing: failure) } else { continuation.resume(returning: .object(fields)) }
        case let .observe(observation):
            if let failure {
                // A paused observation whose replay is too large for kvod resubscribes for a resync instead.
                if observation.resumeRefused(failure) { return nil }
                core.unregister(observation)
                observation.failed(failure)
            } else if let sub = fields["sub"]?.intValue {
                if observation.subscribed(sub: sub, rev: fields["rev"]?.intValue) {
                    routes[sub] = observation
                } else {
                    core.sendUnobserve(sub)
                }
            }
        case let .unobserve(sub):
            routes[sub] = nil
        case let .handshake(isLast):
            if failure == nil, request.op == "hello" { core.announce(features: fields["features"]) }
            if let failure {
                if core.isFirstConnection {
                    core.failStart(failure)
                    return "closed"
                }
                return "the handshake failed: \(failure)"
            }
            if isLast {
                attempt = 0
                core.handshakeSucceeded()
            }
        case let .sessionResume(id):
            if let failure {
                if case .server(.notFound, _, _) = failure { core.sessionLost(id) } else {
                    return "the session could not be resumed: \(failure)"
                }
            }
        case .heartbeat:
            break
        }
        return nil
    }
}
