import KVOJSON

/// Encodes one `ChangeNotification` for all of its recipients, doing the JSON work once.
///
/// An event line is `{"event":"change","sub":N` followed by a tail that is the same for every
/// recipient whose options select the same change-dictionary keys: one of at most four variants
/// (with or without `new`, with or without `old`). The server appends each variant its recipients
/// need once, straight into its arena (`appendTail(variant:to:)`, no array per tail), and the
/// encoder encodes the old and new values' JSON once, however many variants use them; sending an
/// event to a recipient is then the head, a number and one copy of the tail. Loop thread (one
/// encoder per notification).
public struct EventEncoder {
    /// Every event line starts with these bytes, then the subscription id.
    public static let head: [UInt8] = Array("{\"event\":\"change\",\"sub\":".utf8)

    /// `head` (exactly 24 bytes) as three machine words, for writers that store it without `memcpy`.
    public static let headWords: (UInt64, UInt64, UInt64) = head.withUnsafeBytes { raw in
        precondition(raw.count == 24, "the event head must be 24 bytes")
        return (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
    }

    private let notification: ChangeNotification
    /// Tails built by `tail(variant:)`, by variant; empty (no allocation) until it is first used,
    /// which the server never does (it appends tails to its arena).
    private var tails: [[UInt8]?] = []
    private var encodedOld: [UInt8]?
    private var encodedNew: [UInt8]?

    public init(_ notification: ChangeNotification) {
        self.notification = notification
        encodedNew = notification.encodedNew
        assert(encodedNew == nil || encodedNew! == JSONWriter.bytes(notification.new),
               "a notification's encodedNew must be exactly its new value's encoding")
    }

    /// The bytes after the subscription id (up to and including the newline) for a recipient with
    /// `options`.
    public mutating func tail(for options: ObservationOptions) -> [UInt8] {
        tail(variant: variant(for: options))
    }

    /// Which of the (at most four) tails a recipient with `options` gets: 0...3.
    @inline(__always)
    public func variant(for options: ObservationOptions) -> Int {
        let includeNew = (options.contains(.new) || notification.reason == .resync) && notification.carriesNew
        let includeOld = options.contains(.old) && notification.carriesOld
        return (includeNew ? 1 : 0) | (includeOld ? 2 : 0)
    }

    /// The tail of `variant` (from `variant(for:)`) as an array of its own, built on first use and
    /// then shared by every caller asking for the same variant.
    public mutating func tail(variant: Int) -> [UInt8] {
        if tails.isEmpty { tails = [nil, nil, nil, nil] }
        if let tail = tails[variant] { return tail }
        var tail: [UInt8] = []
        appendTail(variant: variant, to: &tail)
        tails[variant] = tail
        return tail
    }

    /// The whole event line for one recipient (for tests and tools; the server appends the pieces).
    public mutating func line(subscription: SubscriptionID, options: ObservationOptions) -> [UInt8] {
        var line = EventEncoder.head
        JSONWriter.writeInteger(subscription, into: &line)
        line.append(contentsOf: tail(for: options))
        return line
    }

    /// Appends the tail of `variant` (from `variant(for:)`) to `buffer`: the bytes after the
    /// subscription id, up to and including the newline.
    public mutating func appendTail(variant: Int, to buffer: inout [UInt8]) {
        let includeNew = variant & 1 != 0
        let includeOld = variant & 2 != 0
        if includeNew && encodedNew == nil { encodedNew = JSONWriter.bytes(notification.new) }
        if includeOld && encodedOld == nil { encodedOld = JSONWriter.bytes(notification.old) }
        // The fixed part is at most about 100 bytes plus the strings: reserve once, not per append.
        buffer.reserveCapacity(buffer.count + 128 + notification.object.utf8.count + notification.keyPath.utf8.count
                               + 12 * (notification.indexes?.count ?? 0)
                               + (includeNew ? encodedNew?.count ?? 0 : 0) + (includeOld ? encodedOld?.count ?? 0 : 0))
        JSONWriter.append(",\"object\":", to: &buffer)
        JSONWriter.writeString(notification.object, into: &buffer)
        JSONWriter.append(",\"keyPath\":", to: &buffer)
        JSONWriter.writeString(notification.keyPath, into: &buffer)
        JSONWriter.append(",\"reason\":\"", to: &buffer)
        buffer.append(contentsOf: notification.reason.rawValue.utf8)
        JSONWriter.append("\",\"rev\":", to: &buffer)
        JSONWriter.writeInteger(notification.rev, into: &buffer)
        JSONWriter.append(",\"change\":{\"kind\":", to: &buffer)
        JSONWriter.writeInteger(notification.kind.rawValue, into: &buffer)
        if let indexes = notification.indexes {
            JSONWriter.append(",\"indexes\":[", to: &buffer)
            for (position, index) in indexes.enumerated() {
                if position > 0 { buffer.append(UInt8(ascii: ",")) }
                JSONWriter.writeInteger(index, into: &buffer)
            }
            buffer.append(UInt8(ascii: "]"))
        }
        if notification.isPrior {
            JSONWriter.append(",\"notificationIsPrior\":true", to: &buffer)
        }
        if includeNew, let encodedNew {
            JSONWriter.append(",\"new\":", to: &buffer)
            buffer.append(contentsOf: encodedNew)
        }
        if includeOld, let encodedOld {
            JSONWriter.append(",\"old\":", to: &buffer)
            buffer.append(contentsOf: encodedOld)
        }
        JSONWriter.append("}}\n", to: &buffer)
    }
}
