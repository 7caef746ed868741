import KVOJSON
import KVOModel
import KVOEngine

/// How many bytes one request's reply, and the events it starts (`observe`'s `initial`, `resync` or
/// replayed history), may add to its connection's queued output without passing the connection's
/// output limit (`--max-output-buffer`).
///
/// A reply that could be large (`get`, `list`, `info`, `classes`, `bindings`, `observe`) is measured
/// against it with `JSONSizeBound` before it is encoded, and refused with `too_large` when it does not
/// fit, instead of being built and then closing the connection as a slow client. Made by the server per
/// request (three integers, no allocation); loop thread.
struct ReplyBudget {
    /// Bytes available for the reply's fields (and the events it starts).
    let bytes: Int
    /// The connection's output limit.
    let outputLimit: Int
    /// Bytes already queued on the connection.
    let queued: Int

    /// Room for the reply's fixed parts: `{"id":…,"ok":true,` … `}\n` and the field names.
    static let envelopeBytes = 96

    /// The budget for a reply on a connection with `queued` bytes queued and limit `outputLimit`,
    /// echoing `id` (counted at its worst-case escaped size).
    init(outputLimit: Int, queued: Int, id: JSONValue?) {
        self.outputLimit = outputLimit
        self.queued = queued
        let idBytes: Int
        switch id {
        case nil: idBytes = 0
        case let .string(text)?: idBytes = text.utf8.count * 6 + 2
        default: idBytes = 24
        }
        bytes = outputLimit - queued - idBytes - ReplyBudget.envelopeBytes
    }

    /// A budget of `bytes` (for tests and callers without a connection).
    init(bytes: Int) {
        self.bytes = bytes
        outputLimit = bytes
        queued = 0
    }

    /// No limit (in-process callers that encode the reply themselves).
    static let unlimited = ReplyBudget(bytes: Int.max / 2)

    /// The `too_large` refusal for `what` ("the value", "the list of 33000 objects").
    func refusal(_ what: String) -> KVOError {
        let queuedNote = queued > 0 ? ", \(queued) already queued" : ""
        return KVOError(.tooLarge,
                        "reply too large: \(what) would take more than \(max(bytes, 0)) bytes, the room left in this "
                            + "connection's output buffer (limit \(outputLimit) bytes\(queuedNote))",
                        details: ["limit": .int(Int64(outputLimit))])
    }
}
