import Foundation
import Glibc

/// The reply subject of a JetStream delivery, read as libnats reads it (nats.c `js_getMetaData`):
/// `$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>` (9 tokens),
/// or the longer form `$JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<timestamp>.<pending>[.<more>…]`
/// (11 tokens or more; libnats ignores what follows `pending`). Any other count is not a delivery's.
struct JetStreamAckReply {
    private var tokens: [Substring]
    /// Where `<stream>` is: 2 in the short form, 4 in the long one.
    private let base: Int

    init?(_ reply: String) {
        guard reply.hasPrefix("$JS.ACK.") else { return nil }
        tokens = reply.split(separator: ".", omittingEmptySubsequences: false)
        switch tokens.count {
        case 9: base = 2
        case 11...: base = 4
        default: return nil
        }
        guard UInt64(tokens[base + 3]) != nil, UInt64(tokens[base + 4]) != nil else { return nil }
    }

    var stream: String { String(tokens[base]) }
    var consumer: String { String(tokens[base + 1]) }
    var streamSequence: UInt64 { UInt64(tokens[base + 3])! }
    var consumerSequence: UInt64 { UInt64(tokens[base + 4])! }

    /// This reply subject with other stream and consumer sequences.
    func reply(stream: UInt64, consumer: UInt64) -> String {
        var copy = tokens
        copy[base + 3] = Substring(String(stream))
        copy[base + 4] = Substring(String(consumer))
        return copy.joined(separator: ".")
    }
}

/// One frame of the NATS client protocol as a server sends it: a control line (INFO, PING, PONG, +OK,
/// -ERR, or one the parser does not know), or a message (MSG, HMSG) with its payload. `bytes` is the
/// frame as it was (or will be) on the wire; a value.
struct NATSFrame: Equatable, Sendable {
    enum Kind: Sendable { case info, msg, hmsg, ping, pong, ok, err, unknown }

    let kind: Kind
    /// The whole frame: control line, its CRLF, and for a message its header block, payload and CRLF.
    let bytes: [UInt8]
    /// A message's subject, subscription id and reply subject; empty (nil) for other frames.
    let subject: String
    let sid: String
    let reply: String?
    /// HMSG: the header block (`NATS/1.0…` to the blank line, header-bytes long); nil for MSG and others.
    let headers: [UInt8]?
    /// A message's payload (after the headers); empty for other frames.
    let payload: [UInt8]

    /// A control-line frame of `bytes` (CRLF included).
    init(kind: Kind, line bytes: [UInt8]) {
        self.kind = kind
        self.bytes = bytes
        subject = ""
        sid = ""
        reply = nil
        headers = nil
        payload = []
    }

    /// A message frame, its control line written with byte counts that match (`HMSG` when `headers`
    /// is not nil: header-bytes and total-bytes).
    init(subject: String, sid: String, reply: String?, headers: [UInt8]?, payload: [UInt8]) {
        var line = headers == nil ? "MSG \(subject) \(sid) " : "HMSG \(subject) \(sid) "
        if let reply { line += "\(reply) " }
        if let headers { line += "\(headers.count) " }
        line += "\((headers?.count ?? 0) + payload.count)\r\n"
        self.init(kind: headers == nil ? .msg : .hmsg, bytes: Array(line.utf8) + (headers ?? []) + payload + [0x0D, 0x0A],
                  subject: subject, sid: sid, reply: reply, headers: headers, payload: payload)
    }

    /// A parsed message frame with its own bytes.
    fileprivate init(kind: Kind, bytes: [UInt8], subject: String, sid: String, reply: String?, headers: [UInt8]?, payload: [UInt8]) {
        self.kind = kind
        self.bytes = bytes
        self.subject = subject
        self.sid = sid
        self.reply = reply
        self.headers = headers
        self.payload = payload
    }

    /// This message with another reply subject and payload.
    func with(reply: String, payload: [UInt8]) -> NATSFrame {
        NATSFrame(subject: subject, sid: sid, reply: reply, headers: headers, payload: payload)
    }

    /// This HMSG with another header block.
    func with(headers: [UInt8]) -> NATSFrame {
        NATSFrame(subject: subject, sid: sid, reply: reply, headers: headers, payload: payload)
    }
}

/// A server→client NATS byte stream that did not parse.
enum NATSFrameError: Error, CustomStringConvertible {
    case malformed(String)

    var description: String {
        switch self {
        case let .malformed(what): return "malformed NATS frame: \(what)"
        }
    }
}

/// Cuts a server→client NATS byte stream into frames, however it was split across reads: `append` what
/// was read, then call `next` until it returns nil (a frame is incomplete). A control line ends at LF (a CR
/// before it is part of the line ending, as libnats reads it); MSG is `MSG <subject> <sid> [reply] <bytes>`
/// and HMSG `HMSG <subject> <sid> [reply] <header bytes> <total bytes>` (arguments separated by spaces or
/// tabs, operation names in any case), each followed by exactly that many bytes and CRLF. A value, owned by
/// one thread.
struct NATSFrameParser {
    private var buffer: [UInt8] = []
    /// Where the unparsed bytes begin in `buffer`.
    private var start = 0

    /// The bytes appended and not yet returned as frames.
    var bufferedCount: Int { buffer.count - start }

    mutating func append(_ bytes: some Collection<UInt8>) {
        buffer.append(contentsOf: bytes)
    }

    /// The bytes not returned as frames (after an error: to forward as they are); empties the parser.
    mutating func takeRemainder() -> [UInt8] {
        defer {
            buffer = []
            start = 0
        }
        return Array(buffer[start...])
    }

    /// The next complete frame, nil when the bytes appended end before one does; throws when they cannot
    /// be a server's frame (a message line with the wrong arguments, or no CRLF after its payload).
    mutating func next() throws(NATSFrameError) -> NATSFrame? {
        guard let newline = buffer[start...].firstIndex(of: 0x0A) else { return nil }
        var lineEnd = newline
        if lineEnd > start, buffer[lineEnd - 1] == 0x0D { lineEnd -= 1 }
        let isSeparator = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        let operationEnd = buffer[start..<lineEnd].firstIndex(where: isSeparator) ?? lineEnd
        let operation = String(decoding: buffer[start..<operationEnd], as: UTF8.self).uppercased()
        let frameEnd: Int
        let frame: NATSFrame
        switch operation {
        case "MSG", "HMSG":
            let arguments = buffer[operationEnd..<lineEnd].split(whereSeparator: isSeparator).map { String(decoding: $0, as: UTF8.self) }
            let hasHeaders = operation == "HMSG"
            let counts = hasHeaders ? 2 : 1
            guard arguments.count == 2 + counts || arguments.count == 3 + counts else {
                throw .malformed("\(operation) with \(arguments.count) arguments: \(NATSFrameParser.quote(buffer[start..<lineEnd]))")
            }
            guard let total = Int(arguments[arguments.count - 1]), total >= 0 else {
                throw .malformed("bad byte count: \(NATSFrameParser.quote(buffer[start..<lineEnd]))")
            }
            let headerCount = hasHeaders ? Int(arguments[arguments.count - 2]) ?? -1 : 0
            guard headerCount >= 0, headerCount <= total else {
                throw .malformed("bad header byte count: \(NATSFrameParser.quote(buffer[start..<lineEnd]))")
            }
            let payloadStart = newline + 1
            let payloadEnd = payloadStart + total
            guard buffer.count >= payloadEnd + 2 else { return nil }
            guard buffer[payloadEnd] == 0x0D, buffer[payloadEnd + 1] == 0x0A else {
                throw .malformed("no CRLF after the \(total) bytes of \(NATSFrameParser.quote(buffer[start..<lineEnd]))")
            }
            frameEnd = payloadEnd + 2
            let headerEnd = payloadStart + headerCount
            frame = NATSFrame(kind: hasHeaders ? .hmsg : .msg, bytes: Array(buffer[start..<frameEnd]),
                              subject: arguments[0], sid: arguments[1], reply: arguments.count == 3 + counts ? arguments[2] : nil,
                              headers: hasHeaders ? Array(buffer[payloadStart..<headerEnd]) : nil,
                              payload: Array(buffer[headerEnd..<payloadEnd]))
        default:
            frameEnd = newline + 1
            frame = NATSFrame(kind: NATSFrameParser.lineKinds[operation] ?? .unknown, line: Array(buffer[start..<frameEnd]))
        }
        start = frameEnd
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 65536 {
            buffer.removeFirst(start)
            start = 0
        }
        return frame
    }

    private static let lineKinds: [String: NATSFrame.Kind] = ["INFO": .info, "PING": .ping, "PONG": .pong, "+OK": .ok, "-ERR": .err]

    private static func quote(_ bytes: ArraySlice<UInt8>) -> String {
        "'\(String(decoding: bytes.prefix(200), as: UTF8.self))'"
    }
}
