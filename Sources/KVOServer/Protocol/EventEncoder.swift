import KVOJSON

/// Encodes one `ChangeNotification` for all of its recipients, doing the JSON work once.
///
/// An event line is `{"event":"change","sub":N` followed by a tail that is the same for every
/// recipient whose options select the same change-dictionary keys. The encoder builds each tail (at
/// most four: with or without `new`, with or without `old`) the first time a recipient needs it, and
/// the old and new values' JSON once, however many recipients there are; sending an event to a
/// recipient is then two short copies and a number. Loop thread (one encoder per notification).
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
    private var tails: [[UInt8]?] = [nil, nil, nil, nil]
    private var encodedOld: [UInt8]?
    private var encodedNew: [UInt8]?

    public init(_ notification: ChangeNotification) {
        self.notification = notification
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

    /// The tail of `variant` (from `variant(for:)`), built on first use.
    public mutating func tail(variant: Int) -> [UInt8] {
        if let tail = tails[variant] { return tail }
        let tail = makeTail(includeNew: variant & 1 != 0, includeOld: variant & 2 != 0)
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

    private mutating func makeTail(includeNew: Bool, includeOld: Bool) -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(128)
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
        if includeNew {
            if encodedNew == nil { encodedNew = JSONWriter.bytes(notification.new) }
            JSONWriter.append(",\"new\":", to: &buffer)
            buffer.append(contentsOf: encodedNew!)
        }
        if includeOld {
            if encodedOld == nil { encodedOld = JSONWriter.bytes(notification.old) }
            JSONWriter.append(",\"old\":", to: &buffer)
            buffer.append(contentsOf: encodedOld!)
        }
        JSONWriter.append("}}\n", to: &buffer)
        return buffer
    }
}
