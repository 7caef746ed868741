import KVOJSON
import KVOModel

/// Observations: observe (with resumption from a revision), unobserve, disconnect, re-checks after a principal changed, info.
/// Loop thread only, like the rest of `KVOEngine`.
extension KVOEngine {
    /// Starts observing `keyPath` of `object` for `connection`. With `.initial`, appends the
    /// initial notification (to be delivered after the reply).
    ///
    /// With `sinceRev`, resumes instead: appends every change to the key path after that revision,
    /// with its original revision (no `initial`), and the observation continues live from the current
    /// revision, with no gap and no duplicate. When history no longer reaches back that far (or the
    /// revision is in the future), appends one `resync` notification with the current value.
    public func observe(_ object: String, keyPath: KeyPath, options: ObservationOptions, connection: ConnectionID,
                        sinceRev: UInt64? = nil, access: ConnectionAccess? = nil,
                        notifications: inout [ChangeNotification]) throws(KVOError) -> SubscriptionID {
        try access?.require(.read, on: object)
        try checkObservationRoom(for: connection)
        if let sinceRev {
            return try resume(object, keyPath: keyPath, options: options, connection: connection, sinceRev: sinceRev,
                              access: access, notifications: &notifications)
        }
        guard objects.contains(object) else { throw notFound(object) }
        var reading: Evaluation?
        let observation = registry.subscribe(connection: connection, object: object, keyPath: keyPath,
                                             options: options, access: access) {
            reading = read(object, keyPath)
            return reading!.dependencies
        }
        try requireReadable(observation)
        if let reading {
            // A new watched path: keep aggregates incrementally where the shape allows.
            observation.watched.lastReading = reading
            observation.watched.aggregate = makeAggregateCache(for: observation.watched, reading: reading)
        }
        if options.contains(.initial) {
            let value = (reading ?? read(object, keyPath)).value
            notifications.append(ChangeNotification(
                object: object, keyPath: keyPath.string, reason: .initial, rev: revision, kind: .setting,
                isPrior: false, old: .null, new: value, recipients: [observation.recipient]))
        }
        return observation.id
    }

    /// Ends a subscription just made and throws `forbidden` when its key path passes through an object
    /// its connection may not read.
    func requireReadable(_ observation: Observation) throws(KVOError) {
        guard let access = observation.access, !access.isUnrestricted,
              !access.allowsRead(observation.watched.dependencies) else { return }
        // Named before the subscription goes: its watched path may go with it.
        let refusal = refusal(reading: observation.watched.object, observation.watched.keyPath, for: access)
        registry.remove(observation.id)
        throw refusal
    }

    func resume(_ object: String, keyPath: KeyPath, options: ObservationOptions, connection: ConnectionID,
                        sinceRev: UInt64, access: ConnectionAccess?,
                        notifications: inout [ChangeNotification]) throws(KVOError) -> SubscriptionID {
        let entries = history.entries(after: sinceRev, current: revision)
        let deletedSince = entries?.contains { $0.object == object && $0.isDeletion } ?? false
        guard objects.contains(object) || deletedSince else { throw notFound(object) }
        var reading: Evaluation?
        let observation = registry.subscribe(connection: connection, object: object, keyPath: keyPath, options: options,
                                             access: access) {
            reading = read(object, keyPath)
            return reading!.dependencies
        }
        if objects.contains(object) { try requireReadable(observation) }
        if let reading {
            observation.watched.lastReading = reading
            observation.watched.aggregate = makeAggregateCache(for: observation.watched, reading: reading)
        }
        // A replay whose key path passed through an object the connection may not read (at some
        // revision of the span) is not sent: a `resync` with the current value stands for it.
        let readable: ((Evaluation) -> Bool)? = access.flatMap { access in
            access.isUnrestricted ? nil : { access.allowsRead($0.dependencies) }
        }
        if let entries, let replay = HistoryReplay(entries, object: object, keyPath: keyPath, options: options,
                                                   recipient: observation.recipient, objects: objects,
                                                   classes: classes, readable: readable) {
            notifications.append(contentsOf: replay.notifications)
            if replay.endedBySourceDeletion || !objects.contains(object) {
                registry.remove(observation.id)
            }
            return observation.id
        }
        guard objects.contains(object) else {
            registry.remove(observation.id)
            throw notFound(object)
        }
        notifications.append(ChangeNotification(
            object: object, keyPath: keyPath.string, reason: .resync, rev: revision, kind: .setting, isPrior: false,
            old: .null, new: read(object, keyPath).value, recipients: [observation.recipient]))
        return observation.id
    }

    /// Ends observation `subscription` if `connection` owns it. Returns whether it did; removing
    /// twice, or removing another connection's observation, returns false and changes nothing.
    public func unobserve(_ subscription: SubscriptionID, connection: ConnectionID) -> Bool {
        if let removed = unobservePattern(subscription, connection: connection) { return removed }
        guard let observation = registry.observation(subscription), observation.connection == connection else {
            return false
        }
        return registry.remove(subscription)
    }

    /// Ends every observation of `connection` (it disconnected). Returns how many there were.
    @discardableResult
    public func disconnect(_ connection: ConnectionID) -> Int {
        registry.removeAll(of: connection)
    }

    /// After `connection`'s principal was replaced (`ConnectionAccess.replace`): ends each of its
    /// observations whose key path now passes through an object it may not read, with one final
    /// `forbidden` notification each (no value). Returns how many ended. O(the connection's observations).
    @discardableResult
    public func accessChanged(for connection: ConnectionID, notifications: inout [ChangeNotification]) -> Int {
        let denied = registry.observations(of: connection)
            .filter { !$0.mayRead($0.watched.dependencies) }
            .sorted { $0.id < $1.id }
        for observation in denied {
            let path = observation.watched
            notifications.append(ChangeNotification(
                object: path.object, keyPath: path.keyPath.string, reason: .forbidden, rev: revision, kind: .setting,
                isPrior: false, old: .null, new: .null, recipients: [observation.recipient]))
            registry.remove(observation.id)
        }
        return denied.count
    }

    /// The observations of `object`, like Cocoa's observationInfo, and the pattern observations matching it.
    public func observers(of object: String, access: ConnectionAccess? = nil) throws(KVOError) -> [ObserverInfo] {
        try access?.require(.read, on: object)
        guard objects.contains(object) else { throw notFound(object) }
        let observers = registry.observations(on: object).map {
            ObserverInfo(subscription: $0.id, keyPath: $0.watched.keyPath.string, options: $0.options,
                         connection: $0.connection, user: $0.access?.user)
        }
        let patternObservers = patternObservers(of: object)
        guard !patternObservers.isEmpty else { return observers }
        return (observers + patternObservers).sorted { $0.subscription < $1.subscription }
    }
}
