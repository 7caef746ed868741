import CWSLay
import KVOEngine
import KVOModel

/// What a `WebSocketSession` hands to the connection it belongs to.
protocol WebSocketSessionOwner: AnyObject {
    /// One complete text message (a request). Returns whether the next message may be handed over at
    /// once; false (reading paused, or closing) holds the following ones in the session.
    func webSocketSessionDidReceive(_ message: UnsafeBufferPointer<UInt8>) -> Bool
    /// Frames wslay wrote (pong, close), to queue after the output already queued.
    func webSocketSessionWrite(_ bytes: UnsafeBufferPointer<UInt8>)
}

/// The WebSocket side (RFC 6455) of an upgraded HTTP connection, framed by wslay (Debian's
/// libwslay-dev) over kvod's own buffers: wslay pulls the bytes the connection read from `receive`,
/// unmasks and reassembles frames, validates UTF-8 and the protocol, answers pings and closes, and
/// writes its control frames through the owner into the connection's output. Data frames out are not
/// wslay's: the connection writes their two-to-ten-byte headers itself in front of the shared event
/// bytes (`ChunkedOutputBuffer.appendWebSocketFrameHeader`), so an event is never copied per subscriber
/// into a wslay queue.
///
/// Owned by one `Connection`, which it reaches unowned; loop thread only. The wslay context and its
/// callbacks reach this object through `user_data` (unretained: the context is freed in `deinit`).
final class WebSocketSession {
    private var context: wslay_event_context_ptr?
    private unowned let owner: WebSocketSessionOwner
    /// The bytes `receive` is offering wslay, and how many it has taken.
    private var input = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
    private var inputTaken = 0
    /// False once the owner said to stop (paused or closing): wslay is told there are no more bytes, and
    /// messages it had already buffered are held.
    private var acceptsMessages = true
    /// Complete messages wslay delivered after the owner paused, in order, for `deliverHeldMessages()`.
    private var heldMessages: [[UInt8]] = []
    private var heldStart = 0
    private(set) var heldBytes = 0

    /// With `maximumMessageBytes` (the connection's request size limit): a longer message is refused with
    /// close code 1009 before it is buffered. Nil when wslay cannot allocate its context.
    init?(owner: WebSocketSessionOwner, maximumMessageBytes: Int) {
        self.owner = owner
        var callbacks = wslay_event_callbacks()
        callbacks.recv_callback = WebSocketSession.recvCallback
        callbacks.send_callback = WebSocketSession.sendCallback
        callbacks.on_msg_recv_callback = WebSocketSession.messageCallback
        let status = wslay_event_context_server_init(&context, &callbacks, Unmanaged.passUnretained(self).toOpaque())
        guard status == 0, let context else { return nil }
        wslay_event_config_set_max_recv_msg_length(context, UInt64(maximumMessageBytes))
    }

    deinit {
        if let context { wslay_event_context_free(context) }
    }

    /// Whether messages wait in `heldMessages`.
    var hasHeldMessages: Bool { heldStart < heldMessages.count }
    /// Whether wslay has sent a close frame (ours or the answer to the client's): no data may follow it.
    var closeSent: Bool { wslay_event_get_close_sent(context) != 0 }
    /// Whether the client's close frame arrived.
    var closeReceived: Bool { wslay_event_get_close_received(context) != 0 }
    /// The code of the close frame sent (1000, 1002, 1007, 1009, ...), once sent.
    var statusCodeSent: UInt16 { wslay_event_get_status_code_sent(context) }

    /// Offers `bytes` to wslay, which hands complete text messages to the owner until it says stop.
    /// Returns how many bytes wslay took (the rest are to be offered again after a pause), or nil when
    /// the session failed beyond a close frame (the connection must close at once).
    func receive(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        input = bytes
        inputTaken = 0
        acceptsMessages = true
        let status = wslay_event_recv(context)
        let taken = inputTaken
        input = UnsafeBufferPointer(start: nil, count: 0)
        inputTaken = 0
        return status == 0 ? taken : nil
    }

    /// Hands held messages to the owner, in order, until it says stop. Returns whether none is left.
    func deliverHeldMessages() -> Bool {
        acceptsMessages = true
        while heldStart < heldMessages.count {
            let message = heldMessages[heldStart]
            heldStart += 1
            heldBytes -= message.count
            let goOn = message.withUnsafeBufferPointer { owner.webSocketSessionDidReceive($0) }
            if !goOn {
                acceptsMessages = false
                break
            }
        }
        if heldStart == heldMessages.count {
            heldMessages.removeAll()
            heldStart = 0
        }
        return !hasHeldMessages
    }

    /// Queues a close frame with `code` (RFC 6455 section 7.4) and a short reason; `flush` sends it.
    func queueClose(code: UInt16, reason: String) {
        var text = Array(reason.utf8.prefix(120))
        while !text.isEmpty, String(validating: text, as: UTF8.self) == nil { text.removeLast() }
        _ = wslay_event_queue_close(context, code, text, text.count)
    }

    /// Writes the control frames wslay has queued (pongs, a close) through the owner. Returns false when
    /// wslay failed (the connection must close).
    func flush() -> Bool {
        guard wslay_event_want_write(context) != 0 else { return true }
        return wslay_event_send(context) == 0
    }

    // MARK: - wslay callbacks (no captures: state comes through user_data)

    private static func session(_ userData: UnsafeMutableRawPointer?) -> WebSocketSession {
        Unmanaged<WebSocketSession>.fromOpaque(userData!).takeUnretainedValue()
    }

    private static let recvCallback: wslay_event_recv_callback = { context, buffer, length, _, userData in
        let session = session(userData)
        let available = session.input.count - session.inputTaken
        guard session.acceptsMessages, available > 0, let buffer, let base = session.input.baseAddress else {
            wslay_event_set_error(context, Int32(WSLAY_ERR_WOULDBLOCK.rawValue))
            return -1
        }
        let count = min(available, length)
        buffer.update(from: base + session.inputTaken, count: count)
        session.inputTaken += count
        return count
    }

    private static let sendCallback: wslay_event_send_callback = { _, data, length, _, userData in
        session(userData).owner.webSocketSessionWrite(UnsafeBufferPointer(start: data, count: length))
        return length
    }

    private static let messageCallback: wslay_event_on_msg_recv_callback = { context, argument, userData in
        guard let argument else { return }
        let session = session(userData)
        switch UInt32(argument.pointee.opcode) {
        case WSLAY_TEXT_FRAME.rawValue:
            let message = UnsafeBufferPointer(start: argument.pointee.msg, count: argument.pointee.msg_length)
            if session.acceptsMessages {
                session.acceptsMessages = session.owner.webSocketSessionDidReceive(message)
            } else {
                session.heldMessages.append(Array(message))
                session.heldBytes += message.count
            }
        case WSLAY_BINARY_FRAME.rawValue:
            session.queueClose(code: UInt16(WSLAY_CODE_UNSUPPORTED_DATA.rawValue),
                               reason: "kvod takes text frames only (one JSON request each)")
            wslay_event_shutdown_read(context)
        default:
            break  // ping, pong and close: wslay answers them itself
        }
    }
}
