import KVOJSON

/// Every stored object by id, each held packed or live (`ObjectSlot`), as Redis keeps a small hash in
/// a compact encoding until it is written.
///
/// - Packed: the object's compact JSON text in one buffer (`PackedObject`), about 20 bytes of overhead
///   beyond the text. What the store loads (`PersistentStore.load` copies each row's text, no decoding)
///   and what the table packs a live object back into.
/// - Live: the decoded members, which writes change in place (no parse per write). An object is live
///   after it is created or written (`insertLive`, `modifyObject`); reading does not make it live
///   (`subscript` decodes a packed object into a new value each time).
///
/// Live objects are bounded: at most `maximumLiveObjects` (`packExcessLive`, which the engine calls
/// after each write), chosen by a second-chance clock over the order they became live: an object
/// written again since it became live or since the clock last passed it gets another round; one that
/// was not is packed again (encoded once by `JSONWriter`). So a store's memory after many writes stays
/// near its packed size plus the bounded live set, while the objects written repeatedly (up to the
/// bound) stay live and their writes never parse.
///
/// Sizes: every object's size as compact JSON (`JSONWriter.encodedLength`) is known without walking
/// it: a packed object's is its text's length; a live object's is kept in its `LiveObject` and changed
/// by each write from the size of what it changed (`modifyObject`'s growth).
///
/// A value type; reading a copy never sees later writes to the original (the packed buffers are
/// immutable and shared; a `LiveObject` shared with a copy is copied before a write changes it; only
/// the clock's hint `written` is shared). Owned by `KVOEngine` (and, before the engine
/// takes it, by the `PersistedState` the store loaded): the server's loop thread is its only user.
public struct ObjectTable: Sendable {
    /// Default of `maximumLiveObjects`: 65,536 objects (about 30 MiB of live three-member objects).
    public static let defaultMaximumLiveObjects = 65_536

    typealias Index = [String: ObjectSlot].Index

    private(set) var slots: [String: ObjectSlot] = [:]
    /// The revision the write being applied will have: `insertLive`, `modifyObject` and `setMemberText`
    /// stamp it as the object's last change. Set by the engine before each write (`KVOEngine.commit`).
    var writeRevision: UInt64 = 0
    /// Number of `.live` slots.
    private(set) var liveCount = 0
    /// The clock: ids in the order they became live (or got their second chance); may hold ids no
    /// longer live, which it skips. `clockHead` is the next to look at.
    private var clock: [String] = []
    private var clockHead = 0
    /// Most objects kept live; `packExcessLive` packs the excess.
    public var maximumLiveObjects = ObjectTable.defaultMaximumLiveObjects

    /// An empty table.
    public init() {}

    /// A table of `values` (each must be a JSON object), every one packed.
    public init(packing values: [String: JSONValue]) {
        slots.reserveCapacity(values.count)
        for (id, value) in values {
            guard case let .object(members) = value else { preconditionFailure("object '\(id)' is not a JSON object") }
            slots[id] = .packed(PackedObject.make(encoding: members))
        }
    }

    // MARK: - Reading

    /// Number of objects.
    public var count: Int { slots.count }
    public var isEmpty: Bool { slots.isEmpty }
    /// Every id, in no particular order.
    package var keys: Dictionary<String, ObjectSlot>.Keys { slots.keys }

    /// Whether object `id` exists (no decoding).
    public func contains(_ id: String) -> Bool {
        slots.index(forKey: id) != nil
    }

    /// Object `id`'s value (decoded when packed), nil when there is none.
    public subscript(id: String) -> JSONValue? {
        slots[id]?.value
    }

    func index(forKey id: String) -> Index? {
        slots.index(forKey: id)
    }

    /// The value at `index` (decoded when packed).
    func value(at index: Index) -> JSONValue {
        slots.values[index].value
    }

    /// The revision of object `id`'s last change (its creation, or a write to it; 0 when unknown: a table
    /// built by hand, or a store from before kvod kept it), nil when there is no such object.
    public func changedRevision(of id: String) -> UInt64? {
        slots[id]?.changed
    }

    /// Sets object `id`'s last-change revision (a restore that knows it: a cluster snapshot, tests). A packed
    /// object is packed anew (its buffer is immutable and may be shared).
    package mutating func setChangedRevision(_ id: String, _ revision: UInt64) {
        guard let index = slots.index(forKey: id) else { return }
        switch slots.values[index] {
        case let .packed(packed): slots.values[index] = .packed(packed.withChanged(revision))
        case .live:
            let live = takeLive(at: index)
            live.changed = revision
            slots.values[index] = .live(live)
        case .vacant: preconditionFailure("object '\(id)' is being modified")
        }
    }

    /// Whether object `id` is held live (for tests).
    func isLive(_ id: String) -> Bool {
        if case .live? = slots[id] { return true }
        return false
    }

    /// Object `id`'s size as compact JSON, nil when there is none.
    func size(of id: String) -> Int? {
        slots[id].map(ObjectTable.size)
    }

    private static func size(of slot: ObjectSlot) -> Int {
        switch slot {
        case let .packed(packed): return packed.count
        case let .live(live): return live.size
        case .vacant: preconditionFailure("a vacant object slot was measured")
        }
    }

    /// What `--max-memory` counts for the objects: every id's UTF-8 bytes and every object's size.
    /// O(objects): for a restore only.
    var storedBytes: Int {
        var total = 0
        for (id, slot) in slots { total += id.utf8.count + ObjectTable.size(of: slot) }
        return total
    }

    /// Appends object `id`'s compact JSON (exactly `JSONWriter.write` of its value) to `buffer`;
    /// false, appending nothing, when there is no such object. A packed object is copied, not decoded.
    func writeCompactJSON(of id: String, into buffer: inout [UInt8]) -> Bool {
        switch slots[id] {
        case nil: return false
        case let .packed(packed)?: packed.appendText(to: &buffer)
        case let .live(live)?: JSONWriter.write(.object(live.decodedMembers), into: &buffer)
        case .vacant?: preconditionFailure("a vacant object slot was read")
        }
        return true
    }

    // MARK: - Writing

    package mutating func reserveCapacity(_ count: Int) {
        slots.reserveCapacity(count)
    }

    /// Adds object `id` (which must not exist) as live, with its size as compact JSON.
    mutating func insertLive(_ id: String, members: [String: JSONValue], size: Int) {
        let previous = slots.updateValue(.live(LiveObject(members: members, size: size, written: false, changed: writeRevision)),
                                         forKey: id)
        precondition(previous == nil, "object '\(id)' already exists")
        liveCount += 1
        enqueue(id)
    }

    /// Stores `members` as object `id`'s value, packed (replacing whatever was there). For the loader.
    /// Returns whether `id` is new to the table.
    @discardableResult
    package mutating func setPacked(_ id: String, members: [String: JSONValue], changed: UInt64 = 0) -> Bool {
        setPacked(id, PackedObject.make(encoding: members, changed: changed))
    }

    /// Stores `packed` as object `id`'s value (replacing whatever was there). Returns whether `id` is
    /// new to the table.
    @discardableResult
    package mutating func setPacked(_ id: String, _ packed: PackedObject) -> Bool {
        let previous = slots.updateValue(.packed(packed), forKey: id)
        if case .live? = previous { liveCount -= 1 }
        return previous == nil
    }

    /// Object `id`'s slot as it is (nil: absent), for a batch's undo (`BatchWrite`): holding it keeps it as it
    /// is, since a write copies a live object another holder shares (`takeLive`).
    func slot(of id: String) -> ObjectSlot? {
        slots[id]
    }

    /// Puts back a slot `slot(of:)` returned (nil: removes the object): a failed batch's undo.
    mutating func restore(_ id: String, slot: ObjectSlot?) {
        let previous: ObjectSlot?
        if let slot {
            previous = slots.updateValue(slot, forKey: id)
            if case .live = slot {
                liveCount += 1
                enqueue(id)
            }
        } else {
            previous = slots.removeValue(forKey: id)
        }
        if case .live? = previous { liveCount -= 1 }
    }

    /// Removes object `id`; returns its value (decoded when packed), nil when there was none.
    @discardableResult
    mutating func removeValue(forKey id: String) -> JSONValue? {
        guard let slot = slots.removeValue(forKey: id) else { return nil }
        if case .live = slot { liveCount -= 1 }
        return slot.value
    }

    /// Changes the object at `index` in place (making it live if it was packed). `body` gets the value
    /// (always a JSON object, and it must leave one) and the object's size as compact JSON before the
    /// change, and returns its result and how many bytes the change added to that size (negative when
    /// it shrank it). When `body` throws it must have left the value as it was; the size stays too.
    mutating func modifyObject<Result, Failure: Error>(
        at index: Index, _ body: (inout JSONValue, _ sizeBefore: Int) throws(Failure) -> (Result, growth: Int)
    ) throws(Failure) -> Result {
        let live = takeLive(at: index)
        live.decodeTexts()
        var value = JSONValue.object(live.members)
        live.members = [:]
        defer {
            guard case let .object(changed) = value else { preconditionFailure("object '\(slots.keys[index])' is no longer an object") }
            // Release `value`'s reference before storing, so that the members stay uniquely referenced.
            value = .null
            live.members = changed
            slots.values[index] = .live(live)
        }
        let (result, growth) = try body(&value, live.size)
        live.size += growth
        live.changed = writeRevision
        return result
    }

    /// Stores `text` as the member `key` of the object at `index` (making it live if it was packed), held as
    /// text (`LiveObject.texts`), and returns the member it replaced (nil when the key was new). `admit`
    /// gets that member, the object's size as compact JSON before the change and its number of members after
    /// it, and returns how many bytes
    /// the change adds to that size, or throws, and then nothing changes.
    mutating func setMemberText<Failure: Error>(
        at index: Index, key: String, _ text: CanonicalText,
        admit: (_ old: HeldValue?, _ sizeBefore: Int, _ memberCount: Int) throws(Failure) -> Int
    ) throws(Failure) -> HeldValue? {
        let live = takeLive(at: index)
        defer { slots.values[index] = .live(live) }
        // One look-up in the usual case (the key held as text already).
        let old: HeldValue?
        if let previous = live.texts.updateValue(text, forKey: key) {
            old = .text(previous)
        } else if let previous = live.members.removeValue(forKey: key) {
            old = .decoded(previous)
        } else {
            old = nil
        }
        do {
            live.size += try admit(old, live.size, live.members.count + live.texts.count)
            live.changed = writeRevision
        } catch {
            switch old {
            case let .text(previous)?: live.texts[key] = previous
            case let .decoded(previous)?:
                live.texts.removeValue(forKey: key)
                live.members[key] = previous
            case nil: live.texts.removeValue(forKey: key)
            }
            throw error
        }
        return old
    }

    /// Takes the live object at `index` out of its slot (leaving it vacant until the caller puts it back),
    /// made live first if it was packed, copied if another table shares it, and marked written.
    private mutating func takeLive(at index: Index) -> LiveObject {
        // Take the payload out of the slot, so that the table's reference is the only one when no copy
        // of the table shares it (then the members are changed in place).
        var live: LiveObject
        var taken = ObjectSlot.vacant
        swap(&taken, &slots.values[index])
        switch taken {
        case let .live(current):
            taken = .vacant
            live = current
            if !isKnownUniquelyReferenced(&live) { live = live.copy() }
            // Written again while live: the clock passes over it once more.
            live.written = true
        case let .packed(packed):
            live = LiveObject(members: packed.decodedMembers(), size: packed.count, written: false, changed: packed.changed)
            liveCount += 1
            enqueue(slots.keys[index])
        case .vacant:
            preconditionFailure("object '\(slots.keys[index])' is being modified already")
        }
        return live
    }

    /// Decodes object `id`'s members held as text (`LiveObject.texts`), so that reading it again costs no
    /// decoding (for readers that will read it often: `get`, a new observation).
    mutating func decodeTexts(of id: String) {
        guard let index = slots.index(forKey: id), holdsTexts(at: index) else { return }
        let live = takeLive(at: index)
        live.decodeTexts()
        slots.values[index] = .live(live)
    }

    private func holdsTexts(at index: Index) -> Bool {
        if case let .live(live) = slots.values[index] { return !live.texts.isEmpty }
        return false
    }

    /// Packs live objects again until at most `maximumLiveObjects` are live: each in the clock's order,
    /// except that one written again since the clock last passed it (or since it became live) is moved
    /// to the back instead.
    mutating func packExcessLive() {
        while liveCount > maximumLiveObjects, clockHead < clock.count {
            let id = clock[clockHead]
            clockHead += 1
            guard let slotIndex = slots.index(forKey: id), case let .live(live) = slots.values[slotIndex] else {
                continue  // deleted or packed since
            }
            if live.written {
                live.written = false
                clock.append(id)
                continue
            }
            slots.values[slotIndex] = .packed(PackedObject.make(encoding: live.decodedMembers, changed: live.changed))
            liveCount -= 1
        }
        compactClock()
    }

    // MARK: - Private

    /// Puts `id` at the back of the clock.
    private mutating func enqueue(_ id: String) {
        clock.append(id)
        if clock.count > 2 * (liveCount + 64) { compactClock() }
    }

    /// Drops the clock's passed entries, and entries of ids no longer live or already queued, once they
    /// are most of it (so its length stays within a constant factor of the live objects).
    private mutating func compactClock() {
        let tooLong = clock.count > 2 * (liveCount + 64)
        guard tooLong || (clockHead > 0 && clockHead >= clock.count / 2) else { return }
        var seen = Set<String>()
        seen.reserveCapacity(liveCount)
        var kept: [String] = []
        kept.reserveCapacity(liveCount)
        for id in clock[clockHead...] where isLive(id) && seen.insert(id).inserted { kept.append(id) }
        clock = kept
        clockHead = 0
    }
}

extension ObjectTable: Equatable {
    /// Same ids with equal values (`JSONValue` equality; packed or live does not matter).
    public static func == (left: ObjectTable, right: ObjectTable) -> Bool {
        guard left.count == right.count else { return false }
        for id in left.slots.keys {
            guard let value = right[id], value == left[id]! else { return false }
        }
        return true
    }
}

extension ObjectTable: ExpressibleByDictionaryLiteral {
    /// A table of the given objects, packed (for tests and restores built by hand).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(packing: Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
}
