import KVOJSON
import KVOModel

/// The state of a batch while its parts apply (`KVOEngine.beginBatch` to `commitBatch` or `abortBatch`):
/// what undoes it, what its notification pass compares against, and the history it will record.
///
/// - *Undo.* Each object's slot as it was before the batch first touched it (`nil`: it did not exist).
///   Holding the slot is enough: a `LiveObject` held here is not uniquely referenced, so the object
///   table copies it before changing it (`ObjectTable.takeLive`), and a `PackedObject` never changes.
/// - *Before-readings.* Each watched path a part's location can affect, read the first time one is
///   (lazily: a path no earlier part affected still reads as before the batch), in that order; and each
///   touched object's pattern observations, read at its first touch.
/// - *History.* The parts' entries, all with `revision`, recorded only when the batch commits.
///
/// Owned by `KVOEngine` for the length of one request; loop thread only.
final class BatchWrite {
    /// The revision every part's change gets (the engine's revision + 1 when the batch began).
    let revision: UInt64
    /// `KVOEngine.storedBytes` before the first part.
    let storedBytesBefore: Int
    /// How many watched removals (`KVOEngine.removedWatchedObjects`) were noted before the first part: an
    /// abort forgets those its parts noted (the objects are put back), a commit keeps them (an ephemeral
    /// object the batch deleted and created again is a new object, no longer its session's).
    let removedWatchedBefore: Int
    /// Each touched object's slot before the batch (nil: absent), and the order objects were first touched.
    private(set) var savedSlots: [String: ObjectSlot?] = [:]
    private(set) var touchOrder: [String] = []
    /// The watched paths the parts can affect with their readings before the batch, in capture order.
    private(set) var captured: [(path: WatchedPath, before: Evaluation)] = []
    private var capturedIndex: Set<ObjectIdentifier> = []
    /// Pattern observations of each touched object, read before the batch touched it.
    var patternWatches: [String: KVOEngine.PatternWatch] = [:]
    /// The parts' history entries, in order.
    var entries: [HistoryEntry] = []
    /// Writes per object, and the array change of an object whose only write was one (what keeps a lone
    /// `insert`'s indexes precise in the batch's events).
    private var writeCounts: [String: Int] = [:]
    private var arrayChanges: [String: (change: CollectionChange, location: StoredLocation)] = [:]
    /// Each object's expiry before the batch first changed it (nil: none), for the undo.
    private(set) var savedExpiries: [String: Expiry?] = [:]

    init(revision: UInt64, storedBytes: Int, removedWatched: Int) {
        self.revision = revision
        storedBytesBefore = storedBytes
        removedWatchedBefore = removedWatched
    }

    /// Whether `object` was written by an earlier part.
    func touched(_ object: String) -> Bool { savedSlots[object] != nil }

    /// Whether `object` existed before the batch (it must have been touched).
    func existedBefore(_ object: String) -> Bool { savedSlots[object].map { $0 != nil } ?? false }

    /// Saves `object`'s slot (nil: absent) unless an earlier part did.
    func save(_ object: String, slot: ObjectSlot?) -> Bool {
        guard savedSlots[object] == nil else { return false }
        savedSlots[object] = .some(slot)
        touchOrder.append(object)
        return true
    }

    /// Saves `object`'s expiry as it was unless an earlier part changed it.
    func saveExpiry(_ object: String, _ expiry: Expiry?) {
        if savedExpiries[object] == nil { savedExpiries[object] = .some(expiry) }
    }

    /// Adds `path` with its reading `before` unless it was captured already.
    func capture(_ path: WatchedPath, reading before: () -> Evaluation) {
        guard capturedIndex.insert(ObjectIdentifier(path)).inserted else { return }
        captured.append((path, before()))
    }

    /// Counts a write to `object`, remembering it when it is an array change.
    func noteWrite(to object: String, _ change: RecordedChange) {
        writeCounts[object, default: 0] += 1
        if case let .array(array) = change {
            arrayChanges[object] = (CollectionChange(kind: array.kind, indexes: array.indexes, old: array.old, new: array.new),
                                    StoredLocation(object: object, path: array.path))
        }
    }

    /// Counts a write held as text to `object` (never an array change).
    func noteTextWrite(to object: String) {
        writeCounts[object, default: 0] += 1
    }

    /// The array change of `object` when it was the batch's only write to it.
    func onlyArrayChange(of object: String) -> (change: CollectionChange, location: StoredLocation)? {
        guard writeCounts[object] == 1 else { return nil }
        return arrayChanges[object]
    }
}
