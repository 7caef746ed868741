import KVOJSON
import KVOModel

/// One accepted write, as history keeps it: which object it changed and how, as a delta that can
/// be applied forwards (replay) and backwards (roll back to an earlier revision).
///
/// Deltas hold only what the write changed (the replaced and the new subtree, or the array elements
/// involved), never a snapshot of the whole object: keeping a snapshot would share the object's
/// storage with the live store and force the next write to copy it. History entries are what
/// `observe` with `sinceRev` replays and what the persistent store logs.
///
/// An entry holds its change either decoded (a write of this process: `init(rev:object:change:)`) or
/// packed, as the compact JSON text of its history row (`RecordedChange.json` in a `PackedObject`):
/// what the store's `load()` restores, a few bytes beyond the text instead of the decoded values. `change`
/// decodes a packed entry on each call, to exactly the change that was packed; a `set` whose value the engine held
/// as text (`KVOEngine.writeText`) keeps its path, old value and text as they were, decoded only by `change` (the loader checked the row
/// decodes, so a packed entry never fails to). Either way the entry carries the size history's byte limit
/// counts for its change (`changeSize`), so that `ChangeHistory` keeps one array of entries. Equality
/// compares revision, object and change (not `changeSize`), however the change is held. A value type; any thread.
public struct HistoryEntry: Equatable, Sendable {
    /// The revision this write created.
    public let rev: UInt64
    /// The object written (after following references: the object whose value changed).
    public let object: String
    /// What history's byte limit counts for the change: its `estimatedSize`, or what the engine measured
    /// for it while writing (a `set`: its old and new values' encoded lengths).
    let changeSize: Int
    private let storage: Storage

    /// How the change is held. `@unchecked Sendable` because a `PackedObject` is immutable once made.
    private enum Storage: @unchecked Sendable {
        case decoded(RecordedChange)
        case packed(PackedObject)
        /// A `set` whose new value (and perhaps its old one) was held as text (`KVOEngine.writeText`):
        /// kept as it was, decoded only when `change` is asked for.
        case textSet(path: [String], old: HeldValue?, new: CanonicalText)
    }

    public init(rev: UInt64, object: String, change: RecordedChange) {
        self.init(rev: rev, object: object, change: change, changeSize: nil)
    }

    /// An entry holding `change` decoded, counted as `changeSize` when the writer measured it (else its
    /// `estimatedSize`).
    init(rev: UInt64, object: String, change: RecordedChange, changeSize: Int?) {
        self.rev = rev
        self.object = object
        self.changeSize = changeSize ?? change.estimatedSize
        storage = .decoded(change)
    }

    /// An entry for a `set` at `path` whose new value is held as text, counted as `changeSize`.
    init(rev: UInt64, object: String, setAt path: [String], old: HeldValue?, new: CanonicalText, changeSize: Int?) {
        self.rev = rev
        self.object = object
        self.changeSize = changeSize ?? path.reduce(new.count + (old?.encodedLength ?? 0)) { $0 + $1.utf8.count + 3 }
        storage = .textSet(path: path, old: old, new: new)
    }

    /// An entry holding `text`, which must be `JSONWriter`'s encoding of a change's `json`
    /// (`CanonicalObjectScan` proved it, or `packing` wrote it), whose `estimatedSize` is `estimatedSize`.
    package init(rev: UInt64, object: String, packedText text: UnsafeBufferPointer<UInt8>, estimatedSize: Int) {
        self.rev = rev
        self.object = object
        changeSize = estimatedSize
        storage = .packed(PackedObject.make(copying: text))
    }

    /// An entry holding `change` packed (its `json` text).
    package init(rev: UInt64, object: String, packing change: RecordedChange) {
        var text: [UInt8] = []
        change.writeJSON(into: &text)
        self = text.withUnsafeBufferPointer {
            HistoryEntry(rev: rev, object: object, packedText: $0, estimatedSize: change.estimatedSize)
        }
    }

    /// What the write did (decoded anew from a packed entry's text each call).
    public var change: RecordedChange {
        switch storage {
        case let .decoded(change): return change
        case let .packed(packed):
            do throws(ChangeDecodingError) {
                return try RecordedChange(json: .object(packed.decodedMembers()))
            } catch {
                preconditionFailure("a packed history entry does not decode: \(error.reason)")
            }
        case let .textSet(path, old, new):
            return .set(path: path, old: old?.value, new: new.value)
        }
    }

    /// Appends the change's JSON text (`RecordedChange.writeJSON` of `change`) to `buffer`, without decoding
    /// a change held packed or as text.
    package func writeChangeJSON(into buffer: inout [UInt8]) {
        switch storage {
        case let .decoded(change): change.writeJSON(into: &buffer)
        case let .packed(packed): packed.appendText(to: &buffer)
        case let .textSet(path, old, new):
            JSONWriter.append("{\"set\":{\"new\":", to: &buffer)
            buffer.append(contentsOf: new.bytes)
            if let old {
                JSONWriter.append(",\"old\":", to: &buffer)
                old.write(into: &buffer)
            }
            JSONWriter.append(",\"path\":[", to: &buffer)
            for (index, key) in path.enumerated() {
                if index > 0 { buffer.append(UInt8(ascii: ",")) }
                JSONWriter.writeString(key, into: &buffer)
            }
            JSONWriter.append("]}}", to: &buffer)
        }
    }

    /// Whether the change is held packed (restored from disk).
    var isPacked: Bool {
        if case .packed = storage { return true }
        return false
    }

    /// Whether the write created its object (`.created`), without decoding a packed entry.
    package var isCreation: Bool { kindByte == UInt8(ascii: "c") }

    /// Whether the write deleted its object (`.deleted`, or `.expired`), without decoding a packed entry.
    package var isDeletion: Bool { kindByte == UInt8(ascii: "d") || kindByte == UInt8(ascii: "e") }

    /// Whether the write deleted its object because its time to live ended (`.expired`), without decoding.
    package var isExpiry: Bool { kindByte == UInt8(ascii: "e") }

    /// The first letter of the change's kind (`created`, `deleted`, `expired`, `set`, `array`): in a packed entry the
    /// byte after `{"`, its text's only key.
    private var kindByte: UInt8 {
        switch storage {
        case let .decoded(change):
            switch change {
            case .created: return UInt8(ascii: "c")
            case .deleted: return UInt8(ascii: "d")
            case .expired: return UInt8(ascii: "e")
            case .set: return UInt8(ascii: "s")
            case .array: return UInt8(ascii: "a")
            }
        case let .packed(packed): return packed.withText { $0.count > 2 ? $0[2] : 0 }
        case .textSet: return UInt8(ascii: "s")
        }
    }

    public static func == (left: HistoryEntry, right: HistoryEntry) -> Bool {
        left.rev == right.rev && left.object == right.object && left.change == right.change
    }
}

extension RecordedChange {
    /// Applies the change to an object's value (nil: the object does not exist), forwards or
    /// backwards. History only holds changes that applied, so this cannot fail on history's own
    /// states; on anything else it leaves the value as it was.
    package func apply(to value: inout JSONValue?, forward: Bool) {
        switch self {
        // Careful: JSONValue is ExpressibleByNilLiteral, so a bare `nil` here could become JSON null;
        // `.none` is the absent object.
        case let .created(created):
            value = forward ? .some(created) : .none
        case let .deleted(deleted), let .expired(deleted):
            value = forward ? .none : .some(deleted)
        case let .set(path, old, new):
            guard var object = value, let key = path.last else { return }
            let replacement: JSONValue? = forward ? .some(new) : old
            try? object.modify(at: path.dropLast()) { (container: inout JSONValue) throws(KVOError) in
                guard var members = container.takeObject() else { return }
                members[key] = replacement
                container = .object(members)
            }
            value = object
        case let .array(record):
            guard var object = value else { return }
            try? object.modify(at: record.path[...]) { (array: inout JSONValue) throws(KVOError) in
                guard var elements = array.takeArray() else { return }
                defer { array = .array(elements) }
                record.apply(to: &elements, forward: forward)
            }
            value = object
        }
    }

    /// Roughly how many bytes the change holds (for history's byte limit).
    var estimatedSize: Int {
        switch self {
        case let .created(value), let .deleted(value), let .expired(value): return value.estimatedSize
        case let .set(path, old, new): return path.reduce(0) { $0 + $1.utf8.count + 3 } + (old?.estimatedSize ?? 0) + new.estimatedSize
        case let .array(record): return (record.old + record.new).reduce(8 * record.indexes.count) { $0 + $1.estimatedSize }
        }
    }

    /// The `estimatedSize` of the change stored as `text`, when `text` is `JSONWriter`'s encoding of a
    /// `created`, `deleted` or `expired` change of an object (`{"created":{…}}`); nil for any other text, which the
    /// caller must decode (it may still be a valid change). Scans the text once, builds nothing.
    package static func estimatedSize(ofCanonicalCreationOrDeletion text: UnsafeBufferPointer<UInt8>) -> Int? {
        for prefix in ["{\"created\":", "{\"deleted\":", "{\"expired\":"] as [StaticString] {
            let length = prefix.utf8CodeUnitCount
            guard text.count > length + 1, text[text.count - 1] == UInt8(ascii: "}"),
                  UnsafeBufferPointer(start: prefix.utf8Start, count: length).elementsEqual(text[..<length])
            else { continue }
            // The body must be a canonical object running exactly to the closing brace: then the whole text
            // is a canonical object with this one member.
            let body = UnsafeBufferPointer(rebasing: text[length..<(text.count - 1)])
            return JSONValue.estimatedSize(ofCanonicalObject: body)
        }
        return nil
    }
}

extension ArrayChangeRecord {
    /// Redoes (forward) or undoes the mutation on the array's elements.
    func apply(to elements: inout [JSONValue], forward: Bool) {
        switch (kind, forward) {
        case (.insertion, true), (.removal, false):
            let values = kind == .insertion ? new : old
            ArrayIndexEdits.insert(values, at: indexes, into: &elements)
        case (.insertion, false), (.removal, true):
            ArrayIndexEdits.remove(at: indexes, from: &elements)
        case (.replacement, _):
            for (index, value) in zip(indexes, forward ? new : old) where index < elements.count { elements[index] = value }
        case (.setting, _):
            break
        }
    }
}
