import KVOModel

/// One subscription: a connection observing a key path of an object with some options.
///
/// Owned by `ObservationRegistry`; loop thread only.
final class Observation {
    let id: SubscriptionID
    let connection: ConnectionID
    let options: ObservationOptions
    /// The connection's permission checks (shared with the connection: a changed principal is seen
    /// here at once); nil for an unrestricted caller (tests, tools in-process).
    let access: ConnectionAccess?
    /// The shared reading of the (object, key path) this subscription observes.
    unowned let watched: WatchedPath
    /// Position in `watched.subscribers`.
    var index = 0
    /// Position in the registry's list of its connection's observations.
    var connectionIndex = 0

    init(id: SubscriptionID, connection: ConnectionID, options: ObservationOptions, access: ConnectionAccess?,
         watched: WatchedPath) {
        self.id = id
        self.connection = connection
        self.options = options
        self.access = access
        self.watched = watched
    }

    /// Whether this subscriber may read every object `locations` name.
    func mayRead(_ locations: [StoredLocation]) -> Bool {
        guard let access, !access.isUnrestricted else { return true }
        return access.allowsRead(locations)
    }

    var recipient: Recipient {
        Recipient(connection: connection, subscription: id, options: options)
    }
}
