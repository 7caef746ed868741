#if canImport(Glibc)
import Glibc
#endif
import KVOServer

/// The value every benchmark set (kvod) or publish (Redis) carries: exactly `length` ASCII bytes, the
/// same bytes on both servers.
///
/// A string value (`SetShape.Value.string`):
///
///     bytes 0..<16   sequence number, 16 lowercase hex digits (distinct per set, so no set is a no-op)
///     bytes 16..<32  send time, CLOCK_MONOTONIC nanoseconds, 16 lowercase hex digits
///     bytes 32...    'x' filler up to `length`
///
/// Hex digits and 'x' need no JSON escaping, so the kvod value is the JSON string of exactly these bytes
/// and a subscriber finds them verbatim in the event's `new`.
///
/// An object value of M members is the JSON text `{"h":"<the 32 hex digits>","m1":{"n":"x…"},"m2":2,…}`
/// (members `m2` … `m(M-1)` hold their digit; the filler sits in the nested `n`): kvod stores it as an
/// object and writes it back byte for byte (sorted members, no spaces), Redis publishes the same text. A
/// value in a client's form (`SetShape.ObjectForm`, issue 44) is that text with the members in reverse order,
/// `"m2":2.5` and/or `n` starting `caf\u00e9 \/ `; `length` is then its canonical text's, which events carry,
/// and `sentLength` the request's.
struct Payload {
    static let headerLength = 32
    /// The bytes of an object value besides the filler and the `mK` members: `{"h":"` + 32 + `","m1":{"n":"`
    /// + `"}` + `}`.
    static let objectOverhead = 6 + 32 + 13 + 2 + 1
    /// The value's bytes (in canonical form: what events carry).
    let length: Int
    /// The bytes the request (or the Redis publish) carries: `length`, or more when the client's form escapes.
    let sentLength: Int
    let shape: SetShape.Value
    /// Where the 32 hex digits start in the value's canonical bytes.
    let headerOffset: Int

    /// The canonical bytes an object form adds besides the filler (`"m2":2.5` and the `n` prefix).
    static func formOverhead(_ form: SetShape.ObjectForm) -> Int {
        (form.hasFloat ? 2 : 0) + (form.prefix?.canonical.utf8CodeUnitCount ?? 0)
    }

    init(length: Int, shape: SetShape.Value = .string) {
        self.shape = shape
        switch shape {
        case .string:
            precondition(length >= Payload.headerLength, "payloads are at least \(Payload.headerLength) bytes")
            headerOffset = 0
            sentLength = length
        case let .object(members, form):
            precondition((3...10).contains(members), "object values have 3 to 10 members")
            let minimum = Payload.objectOverhead + 7 * (members - 2) + Payload.formOverhead(form)
            precondition(length >= minimum, "a \(members)-member object value is at least \(minimum) bytes")
            headerOffset = 6
            let prefix = form.prefix
            sentLength = length + (prefix.map { $0.sent.utf8CodeUnitCount - $0.canonical.utf8CodeUnitCount } ?? 0)
        }
        self.length = length
    }

    /// The bytes kvod's event carries for the value: the payload, quoted when it is a string.
    var kvodValueLength: Int {
        if case .string = shape { return length + 2 }
        return length
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Writes the payload for (`sequence`, `timestamp`) at `destination` (`sentLength` bytes), in the shape's form.
    func write(to destination: UnsafeMutablePointer<UInt8>, sequence: UInt64, timestamp: UInt64) {
        switch shape {
        case .string:
            writeHeader(to: destination, sequence: sequence, timestamp: timestamp)
            memset(destination + Payload.headerLength, Int32(UInt8(ascii: "x")), length - Payload.headerLength)
        case let .object(members, form):
            var index = 0
            func put(_ text: StaticString) {
                (destination + index).update(from: text.utf8Start, count: text.utf8CodeUnitCount)
                index += text.utf8CodeUnitCount
            }
            func putHeaderMember() {
                put(#""h":""#)
                writeHeader(to: destination + index, sequence: sequence, timestamp: timestamp)
                index += Payload.headerLength
                put(#"""#)
            }
            func putNestedMember() {
                put(#""m1":{"n":""#)
                if let prefix = form.prefix { put(prefix.sent) }
                let filler = length - Payload.objectOverhead - 7 * (members - 2) - Payload.formOverhead(form)
                memset(destination + index, Int32(UInt8(ascii: "x")), filler)
                index += filler
                put(#""}"#)
            }
            func putDigitMember(_ member: Int) {
                let digit = UInt8(ascii: "0") + UInt8(member)
                put(#""m"#)
                destination[index] = digit
                index += 1
                put(#"":"#)
                destination[index] = digit
                index += 1
                if member == 2 && form.hasFloat { put(".5") }
            }
            put("{")
            if form.isUnsorted {
                for member in stride(from: members - 1, through: 2, by: -1) {
                    putDigitMember(member)
                    put(",")
                }
                putNestedMember()
                put(",")
                putHeaderMember()
            } else {
                putHeaderMember()
                put(",")
                putNestedMember()
                for member in 2..<members {
                    put(",")
                    putDigitMember(member)
                }
            }
            put("}")
            precondition(index == sentLength)
        }
    }

    private func writeHeader(to destination: UnsafeMutablePointer<UInt8>, sequence: UInt64, timestamp: UInt64) {
        Payload.hexDigits.withUnsafeBufferPointer { digits in
            for index in 0..<16 {
                destination[index] = digits[Int((sequence >> UInt64(60 - 4 * index)) & 0xf)]
                destination[16 + index] = digits[Int((timestamp >> UInt64(60 - 4 * index)) & 0xf)]
            }
        }
    }

    /// The sequence number and send time in a received payload, or nil if it is not one of ours.
    /// (Runs once per delivery, millions of times a second, so it converts eight hex digits at a time.)
    static func decode(_ bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> (sequence: UInt64, timestamp: UInt64)? {
        guard bytes.count >= offset + headerLength else { return nil }
        let chunks = (bytes.loadUnaligned(fromByteOffset: offset, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self),
                      bytes.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self), bytes.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self))
        guard isHex(chunks.0), isHex(chunks.1), isHex(chunks.2), isHex(chunks.3) else { return nil }
        return (hexValue(chunks.0) << 32 | hexValue(chunks.1), hexValue(chunks.2) << 32 | hexValue(chunks.3))
    }

    /// The value of eight lowercase hex digits loaded little-endian (the first digit in the lowest byte).
    @inline(__always)
    private static func hexValue(_ digits: UInt64) -> UInt64 {
        // Per byte: '0'...'9' (0x30-0x39) -> low nibble; 'a'...'f' (0x61-0x66) -> low nibble + 9.
        let nibbles = (digits & 0x0f0f_0f0f_0f0f_0f0f) &+ 9 &* ((digits >> 6) & 0x0101_0101_0101_0101)
        // Pair neighbouring nibbles into bytes, bytes into 16-bit halves, halves into 32 bits, the earlier
        // (lower-addressed) digit always the more significant.
        let bytes = ((nibbles & 0x000f_000f_000f_000f) << 4) | ((nibbles >> 8) & 0x000f_000f_000f_000f)
        let halves = ((bytes & 0x0000_00ff_0000_00ff) << 8) | ((bytes >> 16) & 0x0000_00ff_0000_00ff)
        return ((halves & 0xffff) << 16) | ((halves >> 32) & 0xffff)
    }

    /// A cheap sanity check that eight bytes could be lowercase hex digits (ASCII with bit 0x20 set, as
    /// digits and lowercase letters are); the length check and the sequence checker catch anything subtler.
    @inline(__always)
    private static func isHex(_ digits: UInt64) -> Bool {
        (digits & 0x8080_8080_8080_8080) == 0 && (digits & 0x2020_2020_2020_2020) == 0x2020_2020_2020_2020
    }
}

/// The two servers' wire formats, for the few requests the benchmark makes: kvod's JSON lines
/// (docs/protocol.md) and Redis's RESP.
///
/// The same logical target is an object's key path `v` on kvod and a channel of the object's name on
/// Redis; for other key paths the channel is `object.keyPath`.
enum Wire {
    case kvod
    case redis

    // MARK: Requests

    /// kvod: `auth` as `user` (a kvod started with users). Redis: nothing.
    func appendAuth(user: String, password: String, to output: ByteBuffer) {
        guard case .kvod = self else { return }
        output.append(Array(#"{"op":"auth","user":"\#(user)","password":"\#(password)"}"#.utf8 + [0x0A]))
    }

    /// kvod: `hello` asking for compact events (docs/protocol.md, "Compact events"); nothing for the full
    /// encoding (kvod's default) or Redis.
    func appendHello(events: EventEncoding, to output: ByteBuffer) {
        guard case .kvod = self, events == .compact else { return }
        output.append(Wire.compactHello)
    }

    /// kvod: `create` the object with `values` (JSON object text, e.g. `{"v":""}`). Redis needs nothing
    /// (channels need no creation).
    func appendCreate(object: [UInt8], values: [UInt8], to output: ByteBuffer) {
        guard case .kvod = self else { return }
        output.append(Wire.createPrefix)
        output.append(object)
        output.append(Wire.createMiddle)
        output.append(values)
        output.append(Wire.createSuffix)
    }

    /// kvod: `observe` object `keyPath` with options ["new"]; Redis: `SUBSCRIBE` its channel.
    func appendSubscribe(object: [UInt8], keyPath: [UInt8], to output: ByteBuffer) {
        switch self {
        case .kvod:
            output.append(Wire.observePrefix)
            output.append(object)
            output.append(Wire.observeMiddle)
            output.append(keyPath)
            output.append(Wire.observeSuffix)
        case .redis:
            let channel = Wire.channel(object: object, keyPath: keyPath)
            output.append(Wire.subscribeHeader)
            appendBulk(channel, to: output)
        }
    }

    /// kvod: `set` object `v` to the payload; Redis: `PUBLISH` the payload on the object's channel.
    func appendPublish(object: [UInt8], payload: Payload, sequence: UInt64, timestamp: UInt64, to output: ByteBuffer) {
        appendPublish(object: object, keyPath: nil, requestID: nil, payload: payload, sequence: sequence,
                      timestamp: timestamp, to: output)
    }

    /// kvod: `set` object `keyPath` (nil: `v`) to the payload, with `"id":requestID` first when there is one
    /// (as clients that match replies send it); Redis: `PUBLISH` the payload on the key path's channel.
    func appendPublish(object: [UInt8], keyPath: [UInt8]?, requestID: UInt64?, payload: Payload, sequence: UInt64,
                       timestamp: UInt64, to output: ByteBuffer) {
        switch self {
        case .kvod:
            if let requestID {
                output.append(Wire.idPrefix)
                output.appendDecimal(Int(truncatingIfNeeded: requestID))
                output.append(Wire.setAfterID)
            } else {
                output.append(Wire.setPrefix)
            }
            output.append(object)
            if let keyPath {
                output.append(Wire.setKeyPath)
                output.append(keyPath)
                output.append(Wire.setValueAfterKeyPath)
            } else {
                output.append(Wire.setMiddle)
            }
            if case .string = payload.shape { output.append(UInt8(ascii: "\"")) }
            payload.write(to: output.reserve(payload.sentLength), sequence: sequence, timestamp: timestamp)
            output.commit(payload.sentLength)
            if case .string = payload.shape { output.append(UInt8(ascii: "\"")) }
            output.append(Wire.setSuffix)
        case .redis:
            output.append(Wire.publishHeader)
            appendBulk(keyPath.map { Wire.channel(object: object, keyPath: $0) } ?? object, to: output)
            output.append(UInt8(ascii: "$"))
            output.appendDecimal(payload.sentLength)
            output.append(Wire.crlf)
            payload.write(to: output.reserve(payload.sentLength), sequence: sequence, timestamp: timestamp)
            output.commit(payload.sentLength)
            output.append(Wire.crlf)
        }
    }

    /// kvod: `{"op":"ping"}`; Redis: `PING`.
    func appendPing(to output: ByteBuffer) {
        switch self {
        case .kvod: output.append(Wire.kvodPing)
        case .redis: output.append(Wire.redisPing)
        }
    }

    private func appendBulk(_ bytes: [UInt8], to output: ByteBuffer) {
        output.append(UInt8(ascii: "$"))
        output.appendDecimal(bytes.count)
        output.append(Wire.crlf)
        output.append(bytes)
        output.append(Wire.crlf)
    }

    static func channel(object: [UInt8], keyPath: [UInt8]) -> [UInt8] {
        keyPath == Array("v".utf8) ? object : object + [UInt8(ascii: ".")] + keyPath
    }

    private static let createPrefix = Array(#"{"op":"create","object":""#.utf8)
    private static let createMiddle = Array(#"","values":"#.utf8)
    private static let createSuffix = Array("}".utf8 + [0x0A])
    private static let observePrefix = Array(#"{"op":"observe","object":""#.utf8)
    private static let observeMiddle = Array(#"","keyPath":""#.utf8)
    private static let observeSuffix = Array(#"","options":["new"]}"#.utf8 + [0x0A])
    private static let setPrefix = Array(#"{"op":"set","object":""#.utf8)
    private static let idPrefix = Array(#"{"id":"#.utf8)
    private static let setAfterID = Array(#","op":"set","object":""#.utf8)
    private static let setMiddle = Array(#"","keyPath":"v","value":"#.utf8)
    private static let setKeyPath = Array(#"","keyPath":""#.utf8)
    private static let setValueAfterKeyPath = Array(#"","value":"#.utf8)
    private static let setSuffix = Array("}".utf8 + [0x0A])
    private static let compactHello = Array(#"{"op":"hello","events":"compact"}"#.utf8 + [0x0A])
    private static let kvodPing = Array(#"{"op":"ping"}"#.utf8 + [0x0A])
    private static let subscribeHeader = Array("*2\r\n$9\r\nSUBSCRIBE\r\n".utf8)
    private static let publishHeader = Array("*3\r\n$7\r\nPUBLISH\r\n".utf8)
    private static let redisPing = Array("*1\r\n$4\r\nPING\r\n".utf8)
    private static let crlf: [UInt8] = [0x0D, 0x0A]

    // MARK: Responses

    /// Hands every complete frame in `bytes[0..<count]` to `sink` and returns how many bytes they took; the
    /// rest is the start of a frame still arriving. `payload` is the run's payload (size and shape), which
    /// lets the kvod scanner find the value without searching the line.
    func scan(_ bytes: UnsafePointer<UInt8>, count: Int, payload: Payload, peer: Peer, receivedAt: UInt64,
              sink: Workload) -> Int {
        switch self {
        case .kvod: return Wire.scanLines(bytes, count: count, payload: payload, peer: peer,
                                          receivedAt: receivedAt, sink: sink)
        case .redis: return Wire.scanRESP(bytes, count: count, peer: peer, receivedAt: receivedAt, sink: sink)
        }
    }

    private static let eventPrefix = Array(#"{"event":"#.utf8)
    /// A compact event starts with its subscription (`{"s":`); replies start `{"id":` or `{"ok":`.
    private static let compactEventPrefix = Array(#"{"s":"#.utf8)
    private static let okPrefix = Array(#"{"ok":true"#.utf8)
    private static let okMember = Array(#""ok":true"#.utf8)
    private static let newKey = Array(#""new":"#.utf8)
    private static let compactNewKey = Array(#""n":"#.utf8)

    /// kvod: one JSON object per line. Lines starting `{"event":` (full encoding) or `{"s":` (compact) are
    /// events; everything else is a reply.
    private static func scanLines(_ bytes: UnsafePointer<UInt8>, count: Int, payload: Payload, peer: Peer,
                                  receivedAt: UInt64, sink: Workload) -> Int {
        var lineStart = 0
        while lineStart < count {
            guard let newline = memchr(bytes + lineStart, 0x0A, count - lineStart) else { break }
            let newlineIndex = bytes.distance(to: newline.assumingMemoryBound(to: UInt8.self))
            var end = newlineIndex
            if end > lineStart && bytes[end - 1] == 0x0D { end -= 1 }
            let line = UnsafeRawBufferPointer(start: bytes + lineStart, count: end - lineStart)
            lineStart = newlineIndex + 1
            if line.isEmpty { continue }
            let compact = hasPrefix(line, compactEventPrefix)
            if compact || hasPrefix(line, eventPrefix) {
                if let value = eventPayload(line, payload: payload, compact: compact) {
                    sink.delivery(to: peer, payload: value, receivedAt: receivedAt)
                } else {
                    sink.malformed(from: peer, text: line)
                }
            } else {
                let ok = hasPrefix(line, okPrefix) || find(okMember, in: line, from: 0) != nil
                sink.reply(from: peer, ok: ok, text: line)
            }
        }
        return lineStart
    }

    /// The payload in an event line's `new` (compact: `n`; for a string value, the string's bytes; for an
    /// object, its text). Our events end `"new":<value>}}` (full encoding, options ["new"], kind 1) or
    /// `"n":<value>}` (compact), so with the run's payload the value sits at a known offset from the end:
    /// checking the bytes before and after it costs nothing per delivery. Anything else falls back to a
    /// search for `"new":"` or `"n":"` (string values only).
    private static func eventPayload(_ line: UnsafeRawBufferPointer, payload: Payload, compact: Bool) -> UnsafeRawBufferPointer? {
        let payloadLength = payload.length
        let quoted = payload.kvodValueLength != payloadLength
        let key = compact ? compactNewKey : newKey
        let closing = compact ? 1 : 2
        let quote = quoted ? 1 : 0
        let start = line.count - closing - payloadLength - quote
        if start >= key.count + quote + (compact ? compactEventPrefix.count : eventPrefix.count),
           line[line.count - 1] == UInt8(ascii: "}"), closing == 1 || line[line.count - 2] == UInt8(ascii: "}"),
           !quoted || (line[start - 1] == UInt8(ascii: "\"") && line[start + payloadLength] == UInt8(ascii: "\"")),
           matches(line, at: start - quote - key.count, key) {
            return UnsafeRawBufferPointer(rebasing: line[start..<(start + payloadLength)])
        }
        guard quoted, let member = find(key + [UInt8(ascii: "\"")], in: line, from: 0) else { return nil }
        let valueStart = member + key.count + 1
        var valueEnd = valueStart
        while valueEnd < line.count && line[valueEnd] != UInt8(ascii: "\"") { valueEnd += 1 }
        guard valueEnd < line.count else { return nil }
        return UnsafeRawBufferPointer(rebasing: line[valueStart..<valueEnd])
    }

    /// Redis RESP: a pub/sub message is `*3` `$7 message` `$n <channel>` `$n <payload>`; every other frame
    /// (`+OK`, `:n`, `-ERR`, subscribe confirmations `*3 subscribe <channel> :n`) is a reply.
    private static func scanRESP(_ bytes: UnsafePointer<UInt8>, count: Int, peer: Peer, receivedAt: UInt64,
                                 sink: Workload) -> Int {
        var position = 0
        while position < count {
            let frameStart = position
            guard let header = readLine(bytes, count: count, from: position) else { break }
            let kind = bytes[frameStart]
            position = header.next
            switch kind {
            case UInt8(ascii: "+"), UInt8(ascii: ":"):
                sink.reply(from: peer, ok: true, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
            case UInt8(ascii: "-"):
                sink.reply(from: peer, ok: false, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
            case UInt8(ascii: "$"):
                guard let length = header.number else {
                    sink.malformed(from: peer, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
                    continue
                }
                if length >= 0 {
                    guard position + length + 2 <= count else { return frameStart }
                    position += length + 2
                }
                sink.reply(from: peer, ok: true, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
            case UInt8(ascii: "*"):
                guard let elements = header.number else {
                    sink.malformed(from: peer, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
                    continue
                }
                var first: UnsafeRawBufferPointer?
                var third: UnsafeRawBufferPointer?
                for element in 0..<max(elements, 0) {
                    guard let elementHeader = readLine(bytes, count: count, from: position) else { return frameStart }
                    let elementKind = bytes[position]
                    position = elementHeader.next
                    var value = UnsafeRawBufferPointer(start: nil, count: 0)
                    if elementKind == UInt8(ascii: "$"), let length = elementHeader.number, length >= 0 {
                        guard position + length + 2 <= count else { return frameStart }
                        value = UnsafeRawBufferPointer(start: bytes + position, count: length)
                        position += length + 2
                    }
                    if element == 0 { first = value } else if element == 2 { third = value }
                }
                if elements == 3, let first, let third, isMessage(first) {
                    sink.delivery(to: peer, payload: third, receivedAt: receivedAt)
                } else {
                    sink.reply(from: peer, ok: true, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
                }
            default:
                sink.malformed(from: peer, text: UnsafeRawBufferPointer(start: bytes + frameStart, count: position - frameStart))
            }
        }
        return position
    }

    /// True for the bulk string `message` (what a pub/sub delivery starts with).
    @inline(__always)
    private static func isMessage(_ word: UnsafeRawBufferPointer) -> Bool {
        word.count == 7 && word.loadUnaligned(as: UInt32.self) == 0x7373_656d /* "mess" */
            && word.loadUnaligned(fromByteOffset: 3, as: UInt32.self) == 0x6567_6173 /* "sage" */
    }

    /// The RESP line at `start`: the integer after its type byte (if it is one) and the index after its
    /// `\r\n`; nil while the line is incomplete.
    @inline(__always)
    private static func readLine(_ bytes: UnsafePointer<UInt8>, count: Int, from start: Int) -> (number: Int?, next: Int)? {
        // Header lines are a few bytes ("*3", "$64"): a plain loop beats a call to memchr.
        var newlineIndex = start
        while newlineIndex < count && bytes[newlineIndex] != 0x0A { newlineIndex += 1 }
        guard newlineIndex < count else { return nil }
        var index = start + 1
        var negative = false
        if index < newlineIndex && bytes[index] == UInt8(ascii: "-") { negative = true; index += 1 }
        var value = 0
        var digits = 0
        while index < newlineIndex, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            value = value * 10 + Int(bytes[index] - UInt8(ascii: "0"))
            index += 1
            digits += 1
        }
        return (digits > 0 ? (negative ? -value : value) : nil, newlineIndex + 1)
    }

    private static func hasPrefix(_ line: UnsafeRawBufferPointer, _ prefix: [UInt8]) -> Bool {
        line.count >= prefix.count && matches(line, at: 0, prefix)
    }

    @inline(__always)
    private static func matches(_ line: UnsafeRawBufferPointer, at offset: Int, _ word: [UInt8]) -> Bool {
        guard offset >= 0, offset + word.count <= line.count else { return false }
        for index in 0..<word.count where line[offset + index] != word[index] { return false }
        return true
    }

    private static func find(_ word: [UInt8], in line: UnsafeRawBufferPointer, from start: Int) -> Int? {
        guard line.count >= word.count else { return nil }
        for offset in start...(line.count - word.count) where matches(line, at: offset, word) { return offset }
        return nil
    }
}

extension ByteBuffer {
    func append(_ byte: UInt8) {
        reserve(1).pointee = byte
        commit(1)
    }
}
