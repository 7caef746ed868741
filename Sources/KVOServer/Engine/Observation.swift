/// One registered observation: a connection watching a key path of an object.
///
/// Owned by `ObservationRegistry`; loop thread only.
final class Observation {
    let id: SubscriptionID
    let connection: ConnectionID
    let object: String
    let keyPath: KeyPath
    let options: ObservationOptions
    /// The trie node that lists this observation (for O(1) removal).
    unowned let node: KeyPathNode

    init(id: SubscriptionID, connection: ConnectionID, object: String, keyPath: KeyPath,
         options: ObservationOptions, node: KeyPathNode) {
        self.id = id
        self.connection = connection
        self.object = object
        self.keyPath = keyPath
        self.options = options
        self.node = node
    }

    var recipient: Recipient {
        Recipient(connection: connection, subscription: id, options: options)
    }
}
