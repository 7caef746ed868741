import CLibUV
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Accepting connections on every listener, the refusals at accept time, and reloading TLS.
/// Loop thread only, like the rest of `Server`.
extension Server {
    func accept(from listener: TCPListener, status: Int32) {
        guard status == 0 else {
            if status == UV_EMFILE.rawValue || status == UV_ENFILE.rawValue {
                logRefusalForDescriptors(uvErrorDescription(status))
            } else {
                logger.warning("accept failed: \(uvErrorDescription(status))")
            }
            return
        }
        lastConnectionID += 1
        let slot = freeSlots.popLast() ?? {
            slots.append(nil)
            return UInt32(slots.count - 1)
        }()
        let connection = Connection(
            id: ConnectionID(lastConnectionID, slot: slot), loop: loop.raw, delegate: self,
            maximumLineLength: configuration.maximumLineLength,
            maximumOutputBytes: configuration.maximumOutputBufferBytes,
            maximumTotalInputBytes: configuration.maximumTotalInputBytes,
            maximumPendingReplies: configuration.maximumPendingRequests,
            tls: listener === tlsListener || (listener === httpListener && configuration.http?.usesTLS == true) ? tlsContext : nil,
            http: listener === httpListener ? HTTPRequestParser.Limits() : nil)
        let acceptStatus = uv_accept(asStream(listener.handle), asStream(connection.handle))
        slots[Int(slot)] = Unmanaged.passUnretained(connection)
        openConnections += 1
        metrics.connectionOpened(Server.metricsTransport(of: connection))
        guard acceptStatus == 0 else {
            connection.close(reason: .socketError("accept: \(uvErrorDescription(acceptStatus))"))
            return
        }
        let tooMany = openConnections > configuration.maximumConnections
        // With users defined, nothing but hello, auth and ping until the connection logs in.
        connection.principal = users.isEmpty ? .open : nil
        let startStatus = connection.start()
        guard startStatus == 0 else {
            connection.close(reason: .socketError("read start: \(uvErrorDescription(startStatus))"))
            return
        }
        // Before the refusals below: a refused TLS connection's reply waits for its handshake, which must
        // not wait for ever.
        if connection.isTLS, let seconds = configuration.tls?.handshakeTimeout, seconds > 0 {
            tlsHandshakeDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ UInt64(seconds * 1000))
        }
        if tooMany, connection.isHTTP {
            connection.sendHTTPResponse(
                HTTPResponse.text(.serviceUnavailable, "the server is at its limit of \(configuration.maximumConnections) connections",
                                  keepAlive: false),
                keepAlive: false, reason: .rejected("over --max-connections"))
            return
        }
        if tooMany {
            let error = KVOError(.tooManyConnections,
                                 "the server is at its limit of \(configuration.maximumConnections) connections")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .rejected(error.message))
            return
        }
        if openConnections > descriptorCapacity {
            let error = KVOError(.tooManyConnections,
                                 "the server is out of file descriptors (\(descriptorCapacity) connections fit its limit)")
            var bytes: [UInt8] = []
            ReplyEncoder.failure(id: nil, error: error, into: &bytes)
            connection.sendAndClose(bytes, reason: .outOfDescriptors)
            logRefusalForDescriptors("\(openConnections - 1) connections open, room for \(descriptorCapacity)")
            return
        }
        if configuration.firstRequestTimeout > 0 {
            let timeout = UInt64(configuration.firstRequestTimeout * 1000)
            firstRequestDeadlines.add(connection.id, deadline: uv_now(loop.raw) &+ timeout)
        }
        // An HTTP connection needs a login only once it upgrades to WebSocket.
        if connection.principal == nil, !connection.isHTTP { addLoginDeadline(for: connection) }
        logger.debug("connection opened", metadata: ["connection": "\(connection.id)", "peer": "\(connection.peer)"])
    }

    /// Logs connections refused for want of file descriptors, one line a second at most with the
    /// count since the last line (a flood of connections must not flood the log as well).
    func logRefusalForDescriptors(_ detail: String) {
        guard let count = descriptorRefusals.record(at: uv_now(loop.raw)) else { return }
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
