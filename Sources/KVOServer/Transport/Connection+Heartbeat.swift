/// The server's heartbeat to a quiet connection (docs/protocol.md, "Idle connections and heartbeats"): what it is
/// on each framing. When it is sent, and what happens when nothing answers, is the idle sweep's (`Server+Liveness`).
/// Loop thread only.
extension Connection {
    /// `{"event":"heartbeat"}` and its newline: what a JSON-lines connection (TCP, TLS, Unix) gets.
    static let heartbeatLine: [UInt8] = Array(#"{"event":"heartbeat"}"#.utf8) + [0x0A]

    /// Queues the heartbeat (a JSON-lines event, a WebSocket ping frame); false when there is none to send: the
    /// connection is closing or about to, its TLS handshake is not finished, or its framing has none (HTTP).
    @discardableResult
    func sendHeartbeat() -> Bool {
        guard !isClosing, closeAfterFlush == nil, !isAwaitingTLSHandshake else { return false }
        if let framing {
            guard let bytes = framing.heartbeat else { return false }
            bytes.withUnsafeBytes { enqueueRaw($0) }
        } else {
            Connection.heartbeatLine.withUnsafeBytes { enqueueRaw($0) }
        }
        return true
    }

    /// Whether the connection has stopped reading for a reason of the server's (back-pressure, a password check,
    /// a backup's copy): then it is not idle for not sending, and the sweep leaves it be.
    var isReadingPaused: Bool { !pausedReasons.isEmpty }
}
