import KVOClient

/// How far each key path of one `kvoclient subscribe` has got, for its notes: which key paths are still
/// observed (a `sourceDeleted` or `forbidden` change ends one), the revision of the last change printed
/// for each, and where each resumed after the last lost connection.
///
/// Bookkeeping only: the library re-observes and skips what was already delivered. Owned by the
/// command's printing loop; one task.
struct SubscriptionProgress {
    private let keyPaths: [String]
    /// The revision of the last change printed per key path (prior notifications aside), or the
    /// `observe` reply's `rev` before any.
    private var lastRevisions: [Int64?]
    /// `lastRevisions` when the connection was last lost: where the key paths resume.
    private var resumeRevisions: [Int64?]
    private var ended: [Bool]
    /// Pattern observations: a `sourceDeleted` names one object gone and ends nothing.
    private let patterns: Bool

    init(keyPaths: [String], startingRevisions: [Int64?], patterns: Bool = false) {
        self.keyPaths = keyPaths
        self.patterns = patterns
        lastRevisions = startingRevisions
        resumeRevisions = startingRevisions
        ended = Array(repeating: false, count: keyPaths.count)
    }

    /// Records a printed change of the key path at `index`.
    mutating func record(_ change: Change<JSONValue>, at index: Int) {
        guard !change.isPrior else { return }
        lastRevisions[index] = change.rev
        if change.reason.endsObservation && !(patterns && change.reason == .sourceDeleted) { ended[index] = true }
    }

    /// The observation at `index` ended.
    mutating func end(_ index: Int) {
        ended[index] = true
    }

    /// True once every key path has ended.
    var isFinished: Bool { !ended.contains(false) }

    /// Number of key paths still observed.
    var activeCount: Int { ended.count(where: { !$0 }) }

    /// The connection was lost: the key paths resume after what has been printed.
    mutating func markResumePoint() {
        resumeRevisions = lastRevisions
    }

    /// Where each key path still observed resumes, for the note after a reconnection:
    /// `date after rev 12, address.city after rev 10`.
    var resumeSummary: String {
        keyPaths.indices.filter { !ended[$0] }
            .map { "\(keyPaths[$0]) after rev \(resumeRevisions[$0].map(String.init) ?? "?")" }
            .joined(separator: ", ")
    }
}
