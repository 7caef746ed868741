import KVOEngine
import KVOJSON
import KVOModel

/// Encodes one `ChangeNotification` for all of its recipients, doing the JSON work once.
///
/// An event line is a head (`{"event":"change","sub":` in the full encoding, `{"s":` in the compact
/// one: `EventEncoding`), the subscription id, and a tail that is the same for every recipient whose
/// options select the same encoding and change-dictionary keys: one of at most eight variants
/// (with or without `new`, with or without `old`, full or compact). The server appends each variant its recipients
/// need once, straight into its arena (`appendTail(variant:of:values:to:)`, no array per tail), and the
/// encoder encodes the old and new values' JSON once, however many variants use them; sending an
/// event to a recipient is then the head, a number and one copy of the tail. The server uses the static
/// functions (`VariantChooser`, `appendTail(variant:of:values:to:)`), which borrow the notification instead
/// of copying it into an encoder; an instance (`tail(for:)`, `line(subscription:options:)`) serves tests and
/// tools. Loop thread (one encoder per notification).
package struct EventEncoder {
    /// Every event line starts with these bytes, then the subscription id.
    package static let head: [UInt8] = Array("{\"event\":\"change\",\"sub\":".utf8)

    /// `head` (exactly 24 bytes) as three machine words, for writers that store it without `memcpy`.
    package static let headWords: (UInt64, UInt64, UInt64) = head.withUnsafeBytes { raw in
        precondition(raw.count == 24, "the event head must be 24 bytes")
        return (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
    }

    /// The compact encoding's head, `{"s":` (5 bytes), zero-padded to three words like `headWords`:
    /// a writer stores all 24 bytes and keeps `compactHeadLength` of them.
    package static let compactHeadWords: (UInt64, UInt64, UInt64) = {
        var padded = Array("{\"s\":".utf8)
        precondition(padded.count == compactHeadLength, "the compact event head must be 5 bytes")
        padded += [UInt8](repeating: 0, count: 24 - padded.count)
        return padded.withUnsafeBytes { raw in
            (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self),
             raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
             raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self))
        }
    }()

    /// Bytes of `headWords` that are the full head.
    package static let fullHeadLength = 24
    /// Bytes of `compactHeadWords` that are the compact head.
    package static let compactHeadLength = 5

    /// The bit of a variant (`variant(for:)`) that selects the compact encoding.
    package static let compactVariantBit = 4
    /// How many variants there are: `variant(for:)` is in `0..<variantCount`.
    package static let variantCount = 8

    /// The old and new values' JSON, each encoded on first use and then shared by every variant that
    /// carries it. The server keeps one per notification next to the notification it borrows
    /// (`appendTail(variant:of:values:to:)`); an `EventEncoder` keeps one with its own copy.
    package struct EncodedValues {
        var old: [UInt8]?
        var new: [UInt8]?

        /// Starts with the notification's `encodedNew` (the text a `set` request carried) and `encodedOld`
        /// (the replaced value's, when held as text), if any.
        package init(_ notification: borrowing ChangeNotification) {
            new = notification.encodedNew
            old = notification.encodedOld
            assert(new == nil || new! == JSONWriter.bytes(notification.new),
                   "a notification's encodedNew must be exactly its new value's encoding")
        }
    }

    private let notification: ChangeNotification
    /// Tails built by `tail(variant:)`, by variant; empty (no allocation) until it is first used.
    private var tails: [[UInt8]?] = []
    private var values: EncodedValues

    package init(_ notification: ChangeNotification) {
        self.notification = notification
        values = EncodedValues(notification)
    }

    /// The bytes after the subscription id (up to and including the newline) for a recipient with
    /// `options`.
    package mutating func tail(for options: ObservationOptions) -> [UInt8] {
        tail(variant: variant(for: options))
    }

    /// Which of the (at most eight) tails a recipient with `options` gets: 0..<8; bit 1 `new`, bit 2
    /// `old`, bit 4 (`compactVariantBit`) the compact encoding.
    @inline(__always)
    package func variant(for options: ObservationOptions) -> Int {
        VariantChooser(notification).variant(for: options)
    }

    /// What `variant(for:)` needs of a notification (three flags), so that a loop over its recipients
    /// does not hold on to the notification itself.
    package struct VariantChooser {
        let newAlways: Bool
        let carriesNew: Bool
        let carriesOld: Bool

        package init(_ notification: borrowing ChangeNotification) {
            newAlways = notification.reason == .resync
            carriesNew = notification.carriesNew
            carriesOld = notification.carriesOld
        }

        /// `EventEncoder.variant(for:)`.
        @inline(__always)
        package func variant(for options: ObservationOptions) -> Int {
            let includeNew = (options.contains(.new) || newAlways) && carriesNew
            let includeOld = options.contains(.old) && carriesOld
            let compact = options.contains(.compactEvents)
            return (includeNew ? 1 : 0) | (includeOld ? 2 : 0) | (compact ? EventEncoder.compactVariantBit : 0)
        }
    }

    /// The tail of `variant` (from `variant(for:)`) as an array of its own, built on first use and
    /// then shared by every caller asking for the same variant.
    package mutating func tail(variant: Int) -> [UInt8] {
        if tails.isEmpty { tails = [[UInt8]?](repeating: nil, count: EventEncoder.variantCount) }
        if let tail = tails[variant] { return tail }
        var tail: [UInt8] = []
        appendTail(variant: variant, to: &tail)
        tails[variant] = tail
        return tail
    }

    /// The whole event line for one recipient (for tests and tools; the server appends the pieces).
    package mutating func line(subscription: SubscriptionID, options: ObservationOptions) -> [UInt8] {
        var line = options.contains(.compactEvents) ? Array("{\"s\":".utf8) : EventEncoder.head
        JSONWriter.writeInteger(subscription, into: &line)
        line.append(contentsOf: tail(for: options))
        return line
    }

    /// Appends the tail of `variant` (from `variant(for:)`) to `buffer`: the bytes after the
    /// subscription id, up to and including the newline.
    package mutating func appendTail(variant: Int, to buffer: inout [UInt8]) {
        EventEncoder.appendTail(variant: variant, of: notification, values: &values, to: &buffer)
    }

    /// `appendTail(variant:to:)` for a notification the caller holds (`Server.deliver` passes the one it
    /// borrows; no encoder keeps a copy of it), with the values' encodings in `values` (one
    /// `EncodedValues` per notification, for all of its variants).
    package static func appendTail(variant: Int, of notification: borrowing ChangeNotification,
                                  values: inout EncodedValues, to buffer: inout [UInt8]) {
        let includeNew = variant & 1 != 0
        let includeOld = variant & 2 != 0
        if includeNew && values.new == nil { values.new = JSONWriter.bytes(notification.new) }
        if includeOld && values.old == nil { values.old = JSONWriter.bytes(notification.old) }
        let encodedNew = includeNew ? values.new : nil
        let encodedOld = includeOld ? values.old : nil
        if variant & EventEncoder.compactVariantBit != 0 {
            appendCompactTail(of: notification, encodedNew: encodedNew, encodedOld: encodedOld, to: &buffer)
            return
        }
        // Written into one scratch and appended in one copy (`ByteScratch`): the fixed part is at most 240
        // bytes (members' names, the reason, three integers), plus the strings escaped, the indexes and the values.
        let bound = 240 + ByteScratch.quotedBound(utf8Count: notification.object.utf8.count)
            + ByteScratch.quotedBound(utf8Count: notification.keyPath.utf8.count)
            + 22 * (notification.indexes?.count ?? 0) + (encodedNew?.count ?? 0) + (encodedOld?.count ?? 0)
        // The closure reaches the notification through a pointer: capturing the borrowed value would copy it.
        withUnsafePointer(to: notification) { event in
            ByteScratch.append(atMost: bound, to: &buffer) { line in
                // An id-set pattern observation's initial and resync events are about no one object, and its
                // events follow no key path: those members are left out (every other event has both).
                if !event.pointee.object.isEmpty {
                    line.append(",\"object\":")
                    line.appendString(event.pointee.object)
                }
                if !event.pointee.keyPath.isEmpty {
                    line.append(",\"keyPath\":")
                    line.appendString(event.pointee.keyPath)
                }
                line.append(",\"reason\":\"")
                line.appendRaw(event.pointee.reason.rawValue)
                if event.pointee.expired { line.append("\",\"cause\":\"expired") }
                line.append("\",\"rev\":")
                line.appendInteger(event.pointee.rev)
                line.append(",\"change\":{\"kind\":")
                line.appendInteger(event.pointee.kind.rawValue)
                if let indexes = event.pointee.indexes {
                    line.append(",\"indexes\":[")
                    for (position, index) in indexes.enumerated() {
                        if position > 0 { line.append(UInt8(ascii: ",")) }
                        line.appendInteger(index)
                    }
                    line.append(UInt8(ascii: "]"))
                }
                if event.pointee.isPrior {
                    line.append(",\"notificationIsPrior\":true")
                }
                if let encodedNew {
                    line.append(",\"new\":")
                    line.append(encodedNew)
                }
                if let encodedOld {
                    line.append(",\"old\":")
                    line.append(encodedOld)
                }
                line.append("}}\n")
            }
        }
    }

    /// The compact tail (docs/protocol.md, "Compact events"): `,"r":REV`, `"t"` (the object, for a
    /// pattern observation's event), then on a prior notification `"p"` (`1`, or the reason's one-letter
    /// code when it is not `valueChanged`) and otherwise `"w"` (the code) unless `valueChanged`, the
    /// indexes of kinds 2-4 under a member named by the kind (`"2"`, `"3"`, `"4"`; kind 1, the default, has
    /// none), and `"n"` and `"o"` (new and old) under the same rules as the full encoding's `change`. No
    /// object, key path or member the subscriber can infer; every event's overhead beyond its values (and
    /// the digits of sub, rev and indexes) is at most 30 bytes, 35 with a pattern event's `t`.
    private static func appendCompactTail(of notification: borrowing ChangeNotification, encodedNew: [UInt8]?,
                                          encodedOld: [UInt8]?, to buffer: inout [UInt8]) {
        // One scratch, one copy (`ByteScratch`): at most 120 fixed bytes, plus the object escaped, the indexes
        // and the values. The closure reaches the notification through a pointer (capturing it would copy it).
        let bound = 120 + ByteScratch.quotedBound(utf8Count: notification.object.utf8.count)
            + 22 * (notification.indexes?.count ?? 0) + (encodedNew?.count ?? 0) + (encodedOld?.count ?? 0)
        withUnsafePointer(to: notification) { event in
            ByteScratch.append(atMost: bound, to: &buffer) { line in
                line.append(",\"r\":")
                line.appendInteger(event.pointee.rev)
                if event.pointee.namesObject && !event.pointee.object.isEmpty {
                    // A pattern observation's event: which object it is about ("t", target: "o" is old).
                    line.append(",\"t\":")
                    line.appendString(event.pointee.object)
                }
                if event.pointee.isPrior {
                    line.append(",\"p\":")
                    appendCompactReason(of: event.pointee, orOne: true, to: &line)
                } else if event.pointee.reason != .valueChanged {
                    line.append(",\"w\":")
                    appendCompactReason(of: event.pointee, orOne: false, to: &line)
                }
                // An ending because the object's time to live ended (`"cause":"expired"` in the full form).
                if event.pointee.expired { line.append(",\"x\":1") }
                if event.pointee.kind != .setting {
                    // Kinds 2-4 always have indexes; an empty list keeps the kind if one ever comes without.
                    line.append(",\"")
                    line.appendInteger(event.pointee.kind.rawValue)
                    line.append("\":[")
                    for (position, index) in (event.pointee.indexes ?? []).enumerated() {
                        if position > 0 { line.append(UInt8(ascii: ",")) }
                        line.appendInteger(index)
                    }
                    line.append(UInt8(ascii: "]"))
                }
                if let encodedNew {
                    line.append(",\"n\":")
                    line.append(encodedNew)
                }
                if let encodedOld {
                    line.append(",\"o\":")
                    line.append(encodedOld)
                }
                line.append("}\n")
            }
        }
    }

    /// Appends the reason's compact code as a JSON string (`"p"` for `pathChanged`, …), or `1` for
    /// `valueChanged` when `orOne` (a prior notification's `p`).
    private static func appendCompactReason(of notification: borrowing ChangeNotification, orOne: Bool,
                                            to line: inout ByteScratch) {
        if orOne && notification.reason == .valueChanged {
            line.append(UInt8(ascii: "1"))
            return
        }
        line.append(UInt8(ascii: "\""))
        line.appendRaw(String(notification.reason.compactCode))
        line.append(UInt8(ascii: "\""))
    }
}
