import CLibUV
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
import KVOEngine
#endif

/// Accepting connections on every listener, the refusals at accept time, and reloading TLS.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// Accepts one connection from `listener`, with the stages its stack names.
    func accept(from listener: Listener, status: Int32) {
        guard status == 0 else {
            if status == UV_EMFILE.rawValue || status == UV_ENFILE.rawValue {
                metrics.connectionRefused(.fileDescriptors)
                logRefusalForDescriptors(uvErrorDescription(status))
            } else {
                logger.warning("accept failed: \(uvErrorDescription(status))")
            }
            return
        }
        let socket = listener.makeConnectionSocket(loop: loop.raw)
        let acceptStatus = uv_accept(listener.stream, socket)
        admit(socket, kind: listener.socketKind, stack: listener.stack, acceptStatus: acceptStatus)
    }

    /// Makes the connection on an accepted `socket` (or one that failed to be accepted, `acceptStatus`
    /// not 0: then it is closed at once), counts it, and applies the refusals and deadlines of accept time.
    /// Returns it (closing, possibly). Every listener, and `EmbeddedConnection`, comes through here.
    @discardableResult
    func admit(_ socket: UnsafeMutablePointer<uv_stream_t>, kind: SocketKind, stack: TransportStack,
               acceptStatus: Int32) -> Connection {
        lastConnectionID += 1
        let slot = freeSlots.popLast() ?? {
            slots.append(nil)
            return UInt32(slots.count - 1)
        }()
        let (transform, framing) = makeStages(stack)
        let connection = Connection(
            id: ConnectionID(lastConnectionID, slot: slot), socket: socket, kind: kind, loop: loop.raw, delegate: self,
            maximumLineLength: configuration.maximumLineLength,
            maximumOutputBytes: configuration.maximumOutputBufferBytes,
            maximumTotalInputBytes: configuration.maximumTotalInputBytes,
            maximumPendingReplies: configuration.maximumPendingRequests,
            transform: transform, framing: framing)
        slots[Int(slot)] = Unmanaged.passUnretained(connection)
        connection.openedAt = clock.wallMilliseconds
        openConnections += 1
        metrics.connectionOpened(connection.metricsTransport)
        guard acceptStatus == 0 else {
            connection.close(reason: .socketError("accept: \(uvErrorDescription(acceptStatus))"))
            return connection
        }
        let tooMany = openConnections > configuration.maximumConnections
        // With users defined, nothing but hello, auth and ping until the connection logs in.
        connection.principal = users.isEmpty ? .open : nil
        let startStatus = connection.start()
        guard startStatus == 0 else {
            connection.close(reason: .socketError("read start: \(uvErrorDescription(startStatus))"))
            return connection
        }
        // Quiet from now (`Server+Liveness`); TCP's own checks follow the same timeout.
        connection.lastReceivedAt = clock.milliseconds
        idleSweep.connectionOpened(now: connection.lastReceivedAt)
        if case .tcp = kind { idleSweep.keepalive.apply(to: UnsafeMutableRawPointer(socket).assumingMemoryBound(to: uv_tcp_t.self)) }
        // Before the refusals below: a refused TLS connection's reply waits for its handshake, which must
        // not wait for ever.
        if connection.isAwaitingTLSHandshake, let seconds = configuration.tls?.handshakeTimeout, seconds > 0 {
            deadlines.tlsHandshake.add(connection.id, deadline: ConnectionDeadlines.deadline(seconds, after: clock.milliseconds))
        }
        if tooMany, connection.isHTTP {
            connection.sendHTTPResponse(
                HTTPResponse.text(.serviceUnavailable, "the server is at its limit of \(configuration.maximumConnections) connections",
                                  keepAlive: false),
                keepAlive: false, reason: .rejected("over --max-connections"))
            return connection
        }
        if tooMany {
            let error = KVOError(.tooManyConnections,
                                 "the server is at its limit of \(configuration.maximumConnections) connections")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .rejected(error.message))
            return connection
        }
        if openConnections > descriptorCapacity {
            let error = KVOError(.tooManyConnections,
                                 "the server is out of file descriptors (\(descriptorCapacity) connections fit its limit)")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .outOfDescriptors)
            logRefusalForDescriptors("\(openConnections - 1) connections open, room for \(descriptorCapacity)")
            return connection
        }
        if configuration.firstRequestTimeout > 0 {
            deadlines.firstRequest.add(connection.id,
                                       deadline: ConnectionDeadlines.deadline(configuration.firstRequestTimeout, after: clock.milliseconds))
        }
        // An HTTP connection needs a login only once it upgrades to WebSocket.
        if connection.principal == nil, !connection.isHTTP { addLoginDeadline(for: connection) }
        logger.debug("connection opened", metadata: ["connection": "\(connection.id)", "peer": "\(connection.peer)"])
        return connection
    }

    /// Logs connections refused for want of file descriptors, one line a second at most with the
    /// count since the last line (a flood of connections must not flood the log as well).
    func logRefusalForDescriptors(_ detail: String) {
        guard let count = rateLimitedLog.descriptorRefusals.record(at: clock.milliseconds) else { return }
        let limit = DescriptorLimit.current()
        logger.warning("""
            refused \(count) connection\(count == 1 ? "" : "s") for want of file descriptors \
            (limit \(limit.soft), \(detail)): raise the limit (ulimit -n) or lower --max-connections
            """)
    }

    /// Reads the TLS certificate, key and CA files again (SIGHUP). New TLS connections use the new
    /// context; open ones keep theirs. When the files cannot be loaded, the previous context stays and one
    /// error line says why. Returns whether it reloaded. Loop thread.
    @discardableResult
    public func reloadTLS() -> Bool {
        precondition(loop.isOnLoopThread, "Server.reloadTLS() must be called on the loop thread")
        guard let tls = configuration.tls else { return false }
        do throws(TLSSetupError) {
            tlsContext = try TLSContext(tls)
            logger.info("reloaded the TLS certificate and key", metadata: [
                "cert": "\(PrintableText.escaped(tls.certificatePath))", "key": "\(PrintableText.escaped(tls.privateKeyPath))",
            ])
            return true
        } catch {
            logger.error("TLS reload failed, still using the previous certificate and key: \(PrintableText.escaped("\(error)", limit: 1000))")
            return false
        }
    }
}
