import CLibUV
import KVOEngine
import KVOJSON
import KVOModel
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The server as its connections' delegate: lines, oversized lines, TLS handshakes, flushes, closings.
extension Server: ConnectionDelegate {
    func connection(_ connection: Connection, didReceiveLine line: UnsafeBufferPointer<UInt8>) {
        handleLine(line, from: connection)
    }

    func connectionDidReceiveOversizedLine(_ connection: Connection) {
        // Cluster mode: answered in order, after the connection's writes in flight.
        if let clusterNode, clusterNode.pipelinedWrites.count(of: connection.id) > 0 {
            clusterNode.pipelinedWrites.hold(.oversizedLine, for: connection.id)
            connection.pauseReading(.replication)
            return
        }
        answerOversizedLine(connection)
    }

    func answerOversizedLine(_ connection: Connection) {
        let error = KVOError(.tooLarge, "line longer than \(configuration.maximumLineLength) bytes; discarded")
        send(.failure(error), id: nil, to: connection)
    }

    var mayWriteImmediately: Bool {
        !storage.keepsWrites || (!handler.engine.hasUncommittedWrites && sessions.uncommitted.isEmpty
            && (cluster == nil || cluster!.appliedSequence == cluster!.committedSequence))
    }

    func connectionsPassedTotalInputLimit(_ connection: Connection) {
        heapTrimmer.noteInput(loop.bufferedInputBytes)
        enforceTotalInputLimit()
    }

    func connectionDidCompleteTLSHandshake(_ connection: Connection) {
        var metadata: Logger.Metadata = ["connection": "\(connection.id)", "peer": "\(connection.peer)"]
        if let name = connection.verifiedClientCommonName { metadata["clientCN"] = "\(PrintableText.escaped(name))" }
        logger.debug("TLS handshake complete", metadata: metadata)
        // A verified client certificate whose CN names a user logs the connection in as that user, as a
        // successful `auth` would (docs/protocol.md, "TLS"); in open mode there is nobody to be.
        if connection.principal == nil, let name = connection.verifiedClientCommonName, let user = users.user(named: name) {
            connection.principal = Principal(user: user.name, policy: policy(ofUser: user.name) ?? AccessPolicy(rules: user.rules))
            logger.debug("authenticated by client certificate", metadata: [
                "connection": "\(connection.id)", "peer": "\(connection.peer)", "user": "\(user.name)",
            ])
        }
    }

    func connectionNeedsFlush(_ connection: Connection) {
        flushQueue.append(connection)
    }

    func connectionHasHeldInput(_ connection: Connection) {
        heldInput.connectionResumed(connection)
    }

    func connectionDidClose(_ connection: Connection, reason: CloseReason) {
        let slot = Int(connection.id.slot)
        if slot < slots.count, slots[slot]?.takeUnretainedValue() === connection {
            slots[slot] = nil
            freeSlots.append(UInt32(slot))
            openConnections -= 1
            metrics.connectionClosed(connection.metricsTransport, reason: reason)
        }
        let removed = handler.engine.disconnect(connection.id)
        detachSession(of: connection.id)
        connectionLeftBackup(connection.id)
        if connection.pausedReasons.contains(.verification) { passwordChecks.cancelWaiting(of: connection.id) }
        let metadata: Logger.Metadata = [
            "connection": "\(connection.id)", "peer": "\(connection.peer)", "subscriptions": "\(removed)",
        ]
        if reason.isNoteworthy {
            if let slot = reason.rateLimitSlot {
                guard rateLimitedLog.admitClosing(slot: slot, at: clock.milliseconds, logger: logger) else { return }
            }
            logger.warning("connection closed: \(reason)", metadata: metadata)
        } else {
            logger.debug("connection closed: \(reason)", metadata: metadata)
        }
    }
}
