/// One subscription: a connection observing a key path of an object with some options.
///
/// Owned by `ObservationRegistry`; loop thread only.
final class Observation {
    let id: SubscriptionID
    let connection: ConnectionID
    let options: ObservationOptions
    /// The shared reading of the (object, key path) this subscription observes.
    unowned let watched: WatchedPath
    /// Position in `watched.subscribers`.
    var index = 0
    /// Position in the registry's list of its connection's observations.
    var connectionIndex = 0

    init(id: SubscriptionID, connection: ConnectionID, options: ObservationOptions, watched: WatchedPath) {
        self.id = id
        self.connection = connection
        self.options = options
        self.watched = watched
    }

    var recipient: Recipient {
        Recipient(connection: connection, subscription: id, options: options)
    }
}
