import KVOJSON
import KVOModel

/// The observable object store: objects, the global revision and every observation.
///
/// Pure and synchronous: no I/O, no clocks, no threads. Each call handles one request and appends
/// the notifications it caused to the caller's `notifications` array, in delivery order (all prior
/// notifications of a change before its ordinary ones). A call that throws changes nothing.
///
/// Every write goes through `commit`: find the watched paths the written location can affect (the
/// tries in `ObservationRegistry`), read them before and after, and notify those whose value (or
/// binding) changed, each once for all its subscribers. Classes (validation, computed properties) are
/// in `KVOEngine+Classes` and `KeyPathEvaluator`; bindings, which listen through the same watched paths
/// and are applied before a write operation returns, in `KVOEngine+Bindings`. Not thread-safe: the
/// server's loop thread owns the engine and is its only caller.
public final class KVOEngine {
    /// Revision of the last accepted create, set, collection change or delete (0 before any).
    package internal(set) var revision: UInt64 = 0
    /// Every object's value; each is a JSON object, held packed (its compact JSON text) until it is
    /// written, then live, with its size as compact JSON (`ObjectTable`). Its ids change only in this
    /// file, where every insertion and removal of an object also updates `sortedIDs`.
    package private(set) var objects = ObjectTable()
    /// The ids of `objects`, in order, for `list` pages without a sort.
    private(set) var sortedIDs = SortedObjectIDs()
    /// What `--max-memory` counts (`sizeLimits.maximumStoredBytes`), kept up to date by every write
    /// from the size of what it changed: each object's id (UTF-8 bytes) and size (`ObjectTable.size`), and
    /// the compact JSON of each class and binding definition. History, observations, indexes and
    /// connection buffers are not counted (each has its own limit).
    public internal(set) var storedBytes = 0
    /// The largest value and object a write may store (`too_large` beyond). Unlimited unless the
    /// server sets them (before it serves).
    public var sizeLimits = StoredSizeLimits.unlimited
    /// Most observations one connection may hold (`too_many_observations` beyond). Unlimited unless
    /// the server sets it (before it serves).
    public var maximumObservationsPerConnection = Int.max
    /// The server's default for `maximumObservationsPerConnection` (`--max-observations-per-connection`).
    public static let defaultMaximumObservationsPerConnection = 100_000
    /// The current rules of a binding's creator, looked up at every application (nil: the user is
    /// gone, the binding stops). The server sets it; the default, for an engine without users, runs
    /// every binding unrestricted.
    public var creatorPolicy: (_ user: String?) -> AccessPolicy? = { _ in .unrestricted }
    let registry = ObservationRegistry()
    /// The defined classes (`defineClass`).
    let classes = ClassCatalog()
    /// Computed values of the store as it is now (emptied by every change).
    let computedMemo = ComputedMemo()
    /// Live query filters evaluated since start (`liveQueryEvaluations`).
    var liveQueryEvaluationCount = 0
    /// The steps a live query's replay may spend on its filter (`PatternReplay.maximumFilterSteps`; less in tests).
    var liveQueryReplayStepLimit = PatternReplay.maximumFilterSteps
    /// The wall-clock time (ms since 1970) of the write being applied, set by the server before each request
    /// (`KVOEngine+Expiry`): the engine reads no clock.
    public var writeTime: Int64 = 0
    /// The objects with a time to live (`KVOEngine+Expiry`).
    let expiries = ExpiryTable()
    /// Objects whose removal the server must hear of (its sessions' ephemeral objects: docs/protocol.md,
    /// "Presence"), set by the server. Removing one (a delete, an expiry, a batch's part, a replicated write)
    /// appends it to `removedWatchedObjects`. Empty in most servers: a delete then pays one `isEmpty`.
    public var removalWatch = Set<String>()
    /// Watched objects removed since the server last took them (`takeRemovedWatchedObjects()`), each a
    /// removal that happened: a batch that fails after removing one puts the object back and drops it from
    /// here (`abortBatch`); one that deletes and creates it again keeps it (the new object is another).
    public internal(set) var removedWatchedObjects: [String] = []
    /// Objects whose expiry changed since the last `takeAcceptedChanges()` (only when `recordsCommitBatches`).
    var uncommittedExpiries: Set<String> = []
    /// Bindings (`bind`, `combineLatest`) and their pending work.
    let bindingTable = BindingTable()
    /// Classes defined since the last `takeCommitBatch()` (only when `recordsCommitBatches`).
    var uncommittedClasses: [String: JSONValue] = [:]
    /// What could not be restored from disk (a class that no longer compiles, a binding whose objects
    /// are gone), for the server to log. Empty after a clean restore.
    public internal(set) var restoreProblems: [String] = []
    /// How many notifications were computed from an incrementally kept aggregate rather than a
    /// full re-read (for tests and diagnostics).
    var incrementalAggregateUpdates = 0
    /// Recent writes, for `observe` with `sinceRev`.
    let history: ChangeHistory
    /// Writes accepted since the last `takeCommitBatch()` (only when `recordsCommitBatches`), and
    /// the objects they touched.
    var pendingEntries: [HistoryEntry] = []
    /// The size of the change `commit`'s write closure is about to return, when the write measured it
    /// already (a `set`: its new and old values' encoded lengths); `record` takes it for history's byte
    /// limit instead of walking both values again (`RecordedChange.estimatedSize`). Loop thread.
    var measuredChangeSize: Int?
    var touchedObjects = Set<String>()
    /// The batch being applied (`beginBatch` to `commitBatch` or `abortBatch`), nil between batches: its
    /// parts' writes are applied and undoable, and notify nobody until it commits (`KVOEngine+Batch`).
    var batch: BatchWrite?
    /// Whether writes are collected for a persistent store.
    public let recordsCommitBatches: Bool

    /// History defaults: the last 100,000 revisions, at most 64 MiB.
    public static let defaultHistoryLimit = 100_000
    public static let defaultHistoryByteLimit = 64 << 20

    /// An empty store. With `recordsCommitBatches`, every accepted write is also collected for
    /// `takeCommitBatch()`.
    public init(historyLimit: Int = KVOEngine.defaultHistoryLimit,
                historyByteLimit: Int = KVOEngine.defaultHistoryByteLimit,
                recordsCommitBatches: Bool = false) {
        history = ChangeHistory(limit: historyLimit, byteLimit: historyByteLimit)
        self.recordsCommitBatches = recordsCommitBatches
    }

    /// A store restored from disk: its objects, revision counter and recent history.
    public convenience init(restoring state: PersistedState,
                            historyLimit: Int = KVOEngine.defaultHistoryLimit,
                            historyByteLimit: Int = KVOEngine.defaultHistoryByteLimit,
                            recordsCommitBatches: Bool = true) {
        self.init(historyLimit: historyLimit, historyByteLimit: historyByteLimit,
                  recordsCommitBatches: recordsCommitBatches)
        objects = state.objects
        // The loader's ordered ids, unless the objects changed since (then sorted afresh).
        if let loaded = state.sortedIDs, loaded.count == state.objects.count {
            sortedIDs = loaded
        } else {
            sortedIDs = SortedObjectIDs(state.objects.keys)
        }
        storedBytes = objects.storedBytes
        revision = state.revision
        history.append(contentsOf: state.history)
        restoreDefinitions(classes: state.classes, bindings: state.bindings, lastBindingID: state.lastBindingID)
        restoreExpiries(state.expiries)
    }

    /// Number of objects.
    public var objectCount: Int { objects.count }
    /// Most objects held decoded (live) at once; the least recently written beyond it are packed again
    /// after each write (`ObjectTable.packExcessLive`). The server may lower it before it serves.
    public var maximumLiveObjects: Int {
        get { objects.maximumLiveObjects }
        set { objects.maximumLiveObjects = newValue }
    }
    /// Changes kept in history for `sinceRev` (at most `--history`), and their bytes (`--history-bytes`).
    public var historyCount: Int { history.count }
    public var historyBytes: Int { history.bytes }
    /// The revision of the oldest change kept in history (nil when it keeps none): `observe` with a `sinceRev`
    /// from one before it on resumes from history.
    public var oldestHistoryRevision: UInt64? { history.oldestRevision }
    /// Number of live observations (subscriptions).
    public var observationCount: Int { registry.count }

    /// Live observations of `connection`, pattern observations included (the server's `clients`).
    package func observationCount(of connection: ConnectionID) -> Int { registry.count(of: connection) }

    /// Whether writes (or class or binding definitions) were accepted since the last `takeCommitBatch()`.
    public var hasUncommittedWrites: Bool {
        !pendingEntries.isEmpty || !uncommittedClasses.isEmpty || !bindingTable.uncommitted.isEmpty
            || !uncommittedExpiries.isEmpty
    }

    /// The writes accepted since the last call, with the final value of every object they touched, and
    /// the class and binding definitions (the server's `takeCommitBatch()` makes them a `CommitBatch`).
    /// Empty when nothing was accepted.
    package func takeAcceptedChanges() -> AcceptedChanges {
        defer {
            pendingEntries.removeAll(keepingCapacity: true)
            touchedObjects.removeAll(keepingCapacity: true)
            uncommittedClasses.removeAll()
            bindingTable.uncommitted.removeAll()
            uncommittedExpiries.removeAll()
        }
        var finalValues: [String: StoredObject] = [:]
        finalValues.reserveCapacity(touchedObjects.count)
        for id in touchedObjects { finalValues[id] = objects[id].map(StoredObject.present) ?? .deleted }
        var expiryChanges: [String: Expiry?] = [:]
        for object in uncommittedExpiries { expiryChanges[object] = .some(expiries[object]) }
        return AcceptedChanges(revision: revision, entries: pendingEntries, objects: finalValues,
                               classes: uncommittedClasses, bindings: bindingTable.uncommitted,
                               lastBindingID: bindingTable.lastID, expiries: expiryChanges)
    }

    /// Records an accepted write (revision already advanced). The change is consumed, so that the
    /// entry moves into history rather than being copied (a retain and a release per value it holds).
    func record(_ object: String, _ change: consuming RecordedChange) {
        let changeSize = measuredChangeSize
        measuredChangeSize = nil
        let entry = HistoryEntry(rev: revision, object: object, change: change, changeSize: changeSize)
        if recordsCommitBatches {
            pendingEntries.append(entry)
            // Runs of writes to one object (the common case) hash its id once.
            if pendingEntries.count < 2 || pendingEntries[pendingEntries.count - 2].object != object {
                touchedObjects.insert(object)
            }
        }
        history.append(consume entry)
        // The write is applied: bound the live objects (a comparison unless there are too many).
        if objects.liveCount > objects.maximumLiveObjects { objects.packExcessLive() }
    }

    /// Tells the object table the revision the write about to be applied will have: it stamps it as the
    /// written object's last change (`ObjectTable.changedRevision(of:)`, what `ifRev` compares).
    func stampNextWrite() {
        objects.writeRevision = batch?.revision ?? revision + 1
    }

    /// Puts `object` back as `slot` held it before a batch touched it (nil: it did not exist, so it goes):
    /// a failed batch's undo (`abortBatch`). Keeps `sortedIDs` in step, as every change of the ids here does.
    func restore(_ object: String, slot: ObjectSlot?) {
        let existsNow = objects.contains(object)
        objects.restore(object, slot: slot)
        if slot == nil, existsNow { sortedIDs.remove(object) }
        if slot != nil, !existsNow { sortedIDs.insert(object) }
    }

    /// Removes `object` (which exists and takes `size` bytes) with its id and bytes; returns its value.
    func removeObject(_ object: String, size: Int) -> JSONValue {
        let previous = objects.removeValue(forKey: object)!
        sortedIDs.remove(object)
        if !expiries.isEmpty { dropExpiry(of: object) }
        if !removalWatch.isEmpty, removalWatch.contains(object) { removedWatchedObjects.append(object) }
        storedBytes -= object.utf8.count + size
        return previous
    }

    /// The watched objects removed since the last call (`removalWatch`), in removal order.
    public func takeRemovedWatchedObjects() -> [String] {
        defer { removedWatchedObjects.removeAll() }
        return removedWatchedObjects
    }

    /// The revision of `object`'s last change (its creation or a write to it), nil when it does not exist.
    public func changedRevision(of object: String) -> UInt64? {
        objects.changedRevision(of: object)
    }

    /// `measuredChangeSize`, which it clears.
    func takeMeasuredChangeSize() -> Int? {
        defer { measuredChangeSize = nil }
        return measuredChangeSize
    }

    /// Records `entry`, an accepted write's (revision already advanced) to `object` (a `set` held as text).
    func record(_ object: String, _ entry: consuming HistoryEntry) {
        if recordsCommitBatches {
            pendingEntries.append(copy entry)
            // Runs of writes to one object (the common case) hash its id once.
            if pendingEntries.count < 2 || pendingEntries[pendingEntries.count - 2].object != object {
                touchedObjects.insert(object)
            }
        }
        history.append(consume entry)
        // The write is applied: bound the live objects (a comparison unless there are too many).
        if objects.liveCount > objects.maximumLiveObjects { objects.packExcessLive() }
    }

    // MARK: - Objects

    /// Creates `object` with `values`; `exists` if it is already there. With `className`, the values
    /// are validated against the class (defaults filled in) and the object keeps its class under
    /// `$class`. Observations that refer to it through a reference are re-bound to it (`pathChanged`).
    public func create(_ object: String, values: [String: JSONValue], className: String? = nil,
                       access: ConnectionAccess? = nil,
                       notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        try access?.require(.write, on: object)
        guard !objects.contains(object) else { throw KVOError(.exists, "object '\(object)' already exists") }
        guard values[ClassCatalog.classKey] == nil else {
            throw KVOError(.badRequest, "'\(ClassCatalog.classKey)' is reserved: name the class with 'class'")
        }
        var stored = values
        if let className {
            guard let compiled = classes[className] else { throw KVOError(.notFound, "class '\(className)' is not defined") }
            stored = try validated { () throws(ValidationFailure) in
                try compiled.definition.validateNewObject(values, classOf: classOfObject(for: access))
            }
            stored[ClassCatalog.classKey] = .string(className)
        }
        let size = JSONWriter.encodedLength(of: .object(stored))
        try checkDepth(of: .object(stored), storedAt: 0, in: object, encodedBytes: size)
        try checkValueSize(size, in: object)
        if size > sizeLimits.maximumObjectBytes { throw objectTooLarge(object, size: size) }
        let growth = object.utf8.count + size
        try checkQuota(growth: growth)
        let rev = try commit(at: StoredLocation(object: object, path: []), notifications: &notifications) { () throws(KVOError) in
            objects.insertLive(object, members: stored, size: size)
            sortedIDs.insert(object)
            storedBytes += growth
            return .created(.object(stored))
        }
        applyPendingBindings(notifications: &notifications)
        return rev
    }

    /// Deletes `object`. Each observation of it ends with a `sourceDeleted` notification; observations
    /// that reach it through a reference stay and are re-bound (`pathChanged`, new value `null`).
    public func delete(_ object: String, access: ConnectionAccess? = nil,
                       notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        try delete(object, access: access, expired: false, notifications: &notifications)
    }

    /// `delete`, recording the deletion as `expired` (its time to live ended) when `expired` is true.
    func delete(_ object: String, access: ConnectionAccess?, expired: Bool,
                notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        try access?.require(.write, on: object)
        guard let size = objects.size(of: object) else { throw notFound(object) }
        try checkRevisionRoom()
        if let batch { return deleteInBatch(batch, object, size: size) }
        let candidates = registry.watchers(affectedBy: StoredLocation(object: object, path: []))
        let before = candidates.map(currentReading)
        let patternWatch = registry.patterns.isEmpty ? nil : patternWatch(for: object)
        let previous = removeObject(object, size: size)
        computedMemo.invalidate()
        revision += 1
        record(object, expired ? .expired(previous) : .deleted(previous))
        var ended: [WatchedPath] = []
        var priors: [ChangeNotification] = []
        var changes: [ChangeNotification] = []
        for (path, old) in zip(candidates, before) {
            if path.object == object {
                ended.append(path)
                guard !path.subscribers.isEmpty else { continue }
                appendPrior(for: path, kind: .setting, old: old.value, indexes: nil, reason: .sourceDeleted, to: &priors)
                changes.append(ChangeNotification(
                    object: object, keyPath: path.keyPath.string, reason: .sourceDeleted, rev: revision, kind: .setting,
                    isPrior: false, old: old.value, new: .null, recipients: path.recipients))
            } else {
                reread(path, before: old, change: nil, at: nil, priors: &priors, changes: &changes)
            }
        }
        for path in ended { registry.drop(path) }
        if let patternWatch { notifyPatterns(patternWatch, of: .deleted, to: object, priors: &priors, changes: &changes) }
        notifications.append(contentsOf: priors)
        notifications.append(contentsOf: changes)
        removeBindings(endedWith: ended, deletedObject: object)
        applyPendingBindings(notifications: &notifications)
        return revision
    }

    /// The whole object (references as stored), or the value at `keyPath`. With `access`, every object
    /// the reading passed through (references followed, elements an operator reached, what computed
    /// properties read) must be readable, or the reading is `forbidden`; `read` on `object` is checked
    /// before its existence, so a denial does not tell whether it exists.
    public func get(_ object: String, keyPath: KeyPath?, access: ConnectionAccess? = nil) throws(KVOError) -> JSONValue {
        try access?.require(.read, on: object)
        guard let value = objects[object] else { throw notFound(object) }
        guard let keyPath else { return value }
        // Read with the caller's rights: `forbidden` before anything in an unreadable object is looked at.
        return try KeyPathEvaluator.evaluate(keyPath, of: object, in: objects, strict: true, classes: classes,
                                             memo: computedMemo, reader: access).value
    }

    /// Sets the value at `keyPath` (through references; into an array element by index) and
    /// notifies every observation whose value this changes. The revision advances even when nothing
    /// changes; then nobody is notified.
    public func set(_ object: String, keyPath: KeyPath, value newValue: JSONValue, encoded: [UInt8]? = nil,
                    access: ConnectionAccess? = nil, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let rev: UInt64
        do throws(KVOError) {
            rev = try write(object, keyPath: keyPath, value: newValue, encoded: encoded, access: access,
                            notifications: &notifications)
        } catch {
            throw concealed(error, writing: keyPath, of: object, access: access)
        }
        applyPendingBindings(notifications: &notifications)
        return rev
    }

    /// `set` without applying the bindings it triggers (they stay pending): for bindings' own writes.
    /// `encoded`, when given, must be exactly `JSONWriter.bytes(newValue)` (the request's own text,
    /// `RequestDecoder.Decoded.valueText`): it gives the value's size without a walk, and the events of
    /// observers reading exactly the written key carry it without encoding the value again.
    func write(_ object: String, keyPath: KeyPath, value newValue: JSONValue, encoded: [UInt8]? = nil,
               access: ConnectionAccess? = nil, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let target = try resolveWrite(keyPath, of: object, access: access)
        return try write(at: target, value: newValue, encoded: encoded, access: access, notifications: &notifications)
    }

    /// `set` of a value given only as its canonical text (a request's `value`, `RequestDecoder.Decoded.valueText`,
    /// which the decoder did not decode). Same checks, replies, notifications and history as `set` of the
    /// decoded value; a top-level key of an object of no class is stored as the text (`writeText`), anything
    /// else decodes it.
    /// `decoded`: the value, when the caller has it decoded already (used where the text path does not apply).
    package func set(_ object: String, keyPath: KeyPath, text: CanonicalText, decoded: JSONValue? = nil,
                     access: ConnectionAccess? = nil, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let rev: UInt64
        do throws(KVOError) {
            rev = try writeText(object, keyPath: keyPath, text: text, decoded: decoded, access: access,
                                notifications: &notifications)
        } catch {
            throw concealed(error, writing: keyPath, of: object, access: access)
        }
        applyPendingBindings(notifications: &notifications)
        return rev
    }

    /// The value held as text (docs/design.md, "Values held as text"): stored in the object's `texts`
    /// (`ObjectTable.setMemberText`), compared with the replaced value by its bytes, sent as they are and
    /// kept so in history; nothing builds its tree unless something reads inside it. Only for a key of the
    /// object itself (one component, no array element) in an object of no class (validation reads the tree);
    /// other writes decode the text and go through `write(at:value:)`.
    func writeText(_ object: String, keyPath: KeyPath, text: CanonicalText, decoded: JSONValue? = nil,
                   access: ConnectionAccess? = nil, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let target = try resolveWrite(keyPath, of: object, access: access)
        let location = target.location
        guard target.arrayIndex == nil, location.path.count == 1, classes.isEmpty,
              location.path[0] != ClassCatalog.classKey else {
            return try write(at: target, value: decoded ?? text.value, encoded: text.bytes, access: access,
                             notifications: &notifications)
        }
        let key = location.path[0]
        let valueBytes = text.count
        if !text.isScalar {
            let room = StoredDepth.maximum - 1
            if valueBytes > 2 * room, text.nestingDepth(upTo: room) > room { throw tooDeep(location.object) }
        }
        try checkValueSize(valueBytes, in: location.object)
        let maximumObjectBytes = sizeLimits.maximumObjectBytes
        let quotaRoom = sizeLimits.maximumStoredBytes - storedBytes
        return try commitText(at: location, text: text, notifications: &notifications) { () throws(KVOError) -> HeldValue? in
            try objects.setMemberText(at: target.objectIndex, key: key, text) {
                (old: HeldValue?, sizeBefore: Int, memberCount: Int) throws(KVOError) -> Int in
                // As `write(at:value:)` measures it: from the old value's size, or that of a new member.
                let oldBytes = old?.encodedLength
                let growth = oldBytes.map { valueBytes - $0 }
                    ?? JSONWriter.encodedLength(ofString: key) + 1 + valueBytes + (memberCount > 1 ? 1 : 0)
                if growth > 0, sizeBefore + growth > maximumObjectBytes || growth > quotaRoom {
                    if sizeBefore + growth > maximumObjectBytes { throw objectTooLarge(location.object, size: sizeBefore + growth) }
                    throw quotaExceeded(growth: growth)
                }
                storedBytes += growth
                measuredChangeSize = key.utf8.count + 3 + valueBytes + (oldBytes ?? 0)
                return growth
            }
        }
    }

    /// `write` at a resolved target.
    func write(at target: WriteTarget, value newValue: JSONValue, encoded: [UInt8]? = nil,
               access: ConnectionAccess? = nil, notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        if let array = target.containingArray, let index = target.arrayIndex {
            // Setting one element is a replacement, as NSMutableArray's replaceObjectAtIndex: is.
            return try mutate(at: array, .replace(indexes: [index], values: [newValue]), access: access,
                              notifications: &notifications)
        }
        let location = target.location
        try checkWrite(at: location, value: newValue, access: access)
        let valueBytes = encoded?.count ?? JSONWriter.encodedLength(of: newValue)
        try checkDepth(of: newValue, storedAt: location.path.count, in: location.object, encodedBytes: valueBytes)
        try checkValueSize(valueBytes, in: location.object)
        let maximumObjectBytes = sizeLimits.maximumObjectBytes
        let quotaRoom = sizeLimits.maximumStoredBytes - storedBytes
        return try commit(at: location, encodedWrite: encoded, notifications: &notifications) { () throws(KVOError) -> RecordedChange in
            // The store has not changed since `resolve`: its index reaches the object without a lookup.
            let key = location.path.last!
            let old = try objects.modifyObject(at: target.objectIndex) {
                (root: inout JSONValue, sizeBefore: Int) throws(KVOError) -> (JSONValue?, growth: Int) in
              var objectGrowth = 0
              let old = try root.modify(at: location.path.dropLast()) {
                (container: inout JSONValue) throws(KVOError) -> JSONValue? in
                guard var members = container.takeObject() else {
                    throw KVOError(.typeMismatch, "cannot set a key of \(container.article) \(container.typeName)")
                }
                defer { container = .object(members) }
                let old = members.updateValue(newValue, forKey: key)
                // The object's new size from the sizes of what changed: the old value, or a new member.
                let oldBytes = old.map(JSONWriter.encodedLength(of:))
                let growth = oldBytes.map { valueBytes - $0 }
                    ?? JSONWriter.encodedLength(ofString: key) + 1 + valueBytes + (members.count > 1 ? 1 : 0)
                // A write that grows its object must pass both limits; one that shrinks or keeps it
                // always goes through (two comparisons, no lookup).
                if growth > 0, sizeBefore + growth > maximumObjectBytes || growth > quotaRoom {
                    if let old { members[key] = old } else { members.removeValue(forKey: key) }
                    if sizeBefore + growth > maximumObjectBytes { throw objectTooLarge(location.object, size: sizeBefore + growth) }
                    throw quotaExceeded(growth: growth)
                }
                objectGrowth = growth
                storedBytes += growth
                // What `RecordedChange.estimatedSize` would add up, from the lengths just measured.
                measuredChangeSize = location.path.reduce(valueBytes + (oldBytes ?? 0)) { $0 + $1.utf8.count + 3 }
                return old
              }
              return (old, objectGrowth)
            }
            return .set(path: location.path, old: old, new: newValue)
        }
    }

    /// Inserts into, removes from or replaces in the array at `keyPath`; its direct observers get a
    /// kind 2, 3 or 4 notification with the indexes, everyone else affected a kind 1.
    public func mutateArray(_ object: String, keyPath: KeyPath, _ mutation: CollectionMutation,
                            access: ConnectionAccess? = nil,
                            notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let rev: UInt64
        do throws(KVOError) {
            let target = try resolveWrite(keyPath, of: object, access: access)
            rev = try mutate(at: target.location, mutation, access: access, notifications: &notifications)
        } catch {
            throw concealed(error, writing: keyPath, of: object, access: access)
        }
        applyPendingBindings(notifications: &notifications)
        return rev
    }

    /// Where a write through `keyPath` of `object` lands, checked against `access`: `write` on `object`
    /// before its existence is looked at, unless the connection may read it and it exists (the write
    /// may then go through one of its references); `read` on every object whose reference the path
    /// follows; and `write` on the object actually written (docs/protocol.md, "Permissions").
    func resolveWrite(_ keyPath: KeyPath, of object: String,
                              access: ConnectionAccess?) throws(KVOError) -> WriteTarget {
        guard let access, !access.isUnrestricted else {
            return try WriteTarget.resolve(keyPath, of: object, in: objects, classes: classes)
        }
        let rights = access.permissions(on: object)
        if !rights.contains(.write) && (!rights.contains(.read) || !objects.contains(object)) {
            throw ConnectionAccess.forbidden(.write, on: object, user: access.user)
        }
        let target = try WriteTarget.resolve(keyPath, of: object, in: objects, classes: classes, access: access)
        if target.location.object == object {
            // The usual case: the object named is the one written, and its rights are known already.
            guard rights.contains(.write) else { throw ConnectionAccess.forbidden(.write, on: object, user: access.user) }
        } else {
            try access.require(.write, on: target.location.object)
        }
        return target
    }

    func mutate(at location: StoredLocation, _ mutation: CollectionMutation, access: ConnectionAccess?,
                        notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        if location.path.first == ClassCatalog.classKey { throw KVOEngine.classKeyIsReadOnly }
        let current = objects[location.object]!.observedValue(at: location.path)
        guard case .array = current else {
            let name = location.path.joined(separator: ".")
            if current == .null { throw KVOError(.notFound, "'\(name)' does not exist") }
            throw KVOError(.typeMismatch, "'\(name)' is \(current.article) \(current.typeName), not an array")
        }
        try checkDepth(of: mutation, at: location)
        for value in mutation.values { try checkValueSize(JSONWriter.encodedLength(of: value), in: location.object) }
        guard let objectIndex = objects.index(forKey: location.object) else { throw notFound(location.object) }
        let maximumObjectBytes = sizeLimits.maximumObjectBytes
        let quotaRoom = sizeLimits.maximumStoredBytes - storedBytes
        let rules = try arrayRules(at: location, for: mutation, access: access)
        return try commit(at: location, notifications: &notifications) { () throws(KVOError) -> RecordedChange in
            // Nothing changed the store since the lookup above (the rules only read it).
            let change = try objects.modifyObject(at: objectIndex) {
                (root: inout JSONValue, sizeBefore: Int) throws(KVOError) -> (CollectionChange, growth: Int) in
              var objectGrowth = 0
              let change = try root.modify(at: location.path[...]) { (value: inout JSONValue) throws(KVOError) in
                guard var elements = value.takeArray() else { throw KVOError(.typeMismatch, "not an array") }
                defer { value = .array(elements) }
                let change = try mutation.apply(to: &elements)
                if let rules {
                    do throws(KVOError) {
                        try rules(change.new, elements.count)
                    } catch {
                        // Refused by the class: undo, so that nothing changed.
                        ArrayChangeRecord(path: location.path, kind: change.kind, indexes: change.indexes,
                                          old: change.old, new: change.new).apply(to: &elements, forward: false)
                        throw error
                    }
                }
                let growth = CollectionChange.sizeGrowth(of: change, resultingCount: elements.count)
                if growth > 0, sizeBefore + growth > maximumObjectBytes || growth > quotaRoom {
                    ArrayChangeRecord(path: location.path, kind: change.kind, indexes: change.indexes,
                                      old: change.old, new: change.new).apply(to: &elements, forward: false)
                    if sizeBefore + growth > maximumObjectBytes { throw objectTooLarge(location.object, size: sizeBefore + growth) }
                    throw quotaExceeded(growth: growth)
                }
                objectGrowth = growth
                storedBytes += growth
                return change
              }
              return (change, objectGrowth)
            }
            return .array(ArrayChangeRecord(path: location.path, kind: change.kind, indexes: change.indexes,
                                            old: change.old, new: change.new))
        }
    }

    /// Every object id, sorted (O(n): a request path pages with `objectIDs(after:)` instead).
    public func objectIDs() -> [String] {
        sortedIDs.all
    }

    /// The object ids greater than `after` (all without it), in order, walked lazily: O(log n) to
    /// start, O(1) per id.
    package func objectIDs(after: String?) -> SortedObjectIDs.Cursor {
        sortedIDs.ids(after: after)
    }
}

/// One observation as `info` reports it.
public struct ObserverInfo: Equatable, Sendable {
    public let subscription: SubscriptionID
    public let keyPath: String
    public let options: ObservationOptions
    public let connection: ConnectionID
    /// The user the observing connection acts for (nil in open mode).
    public var user: String? = nil
    /// For a pattern observation matching the object: its pattern (`keyPath` is then empty for an id set).
    public var pattern: String? = nil
    /// For a live query: its `where` expression.
    public var filter: String? = nil
}
