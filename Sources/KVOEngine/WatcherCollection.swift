/// The watched paths one `ObservationRegistry.watchers(affectedBy:)` query collects, each once.
///
/// A path registered at several of the nodes a write affects is collected the first time only: the
/// query stamps what it took with its own number (`WatchedPath.collectedStamp`), which is cheaper than
/// a set. A value on the query's stack, with no closure and no box: a `set` runs one query. Loop
/// thread only, like the registry.
struct WatcherCollection {
    private let stamp: Int
    private var paths: [WatchedPath] = []

    init(stamp: Int) {
        self.stamp = stamp
    }

    /// Adds the paths in `watchers` not collected yet by this query.
    mutating func add(_ watchers: [WatchedPath]) {
        for path in watchers where path.collectedStamp != stamp {
            path.collectedStamp = stamp
            paths.append(path)
        }
    }

    /// What was collected, in subscription order (registration serial).
    var inSubscriptionOrder: [WatchedPath] {
        paths.count < 2 ? paths : paths.sorted { $0.serial < $1.serial }
    }
}
