import KVOClient

/// What `kvoclient subscribe`'s printing loop handles, in the order it arrives: changes and ends from the
/// tasks iterating the observations, connection states from the task watching the client, and the
/// interrupt. One loop consumes them, so the output and the bookkeeping have a single owner.
enum SubscriberEvent: Sendable {
    /// A change of the key path at this index.
    case change(Int, Change<JSONValue>)
    /// The observation at this index ended (after `sourceDeleted` or `forbidden`).
    case ended(Int)
    /// The observation at this index failed (the server refused it after a reconnection, or the client closed).
    case failed(Int, any Error)
    /// The client's connection state changed.
    case state(ConnectionState)
    /// A `ping` sent once reconnected was answered: every resubscription has been answered before it,
    /// and this many observations are still live on the server.
    case resumed(liveObservations: Int)
    /// SIGINT or SIGTERM arrived.
    case interrupted
}
