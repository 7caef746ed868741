import KVOJSON
import KVOModel

/// Bindings: creation (with cycle refusal), application after the writes that change their sources,
/// removal (explicit, or when a source or target object is deleted), and restoring them from disk.
///
/// A binding listens to its sources through the same watched paths as observations, so a write finds
/// it through the key-path tries and a source is read once per change however many observers and
/// bindings share it. A write queues the bindings whose sources it changed (`BindingTable.pending`);
/// each public write operation then applies them, in order, before it returns, so the events of the
/// writes they make follow the events of the write that caused them, in the same request. Loop thread
/// only, as the engine.
extension KVOEngine {
    /// Creates a `bind` or `combineLatest` binding and returns its id. The objects named must exist,
    /// the target must be writable (no operator, not computed), the expressions must compile, and the
    /// binding must not be able to trigger itself through other bindings (`cycle`). With `now`, the
    /// current value is applied at once.
    ///
    /// With `access` (the creator's connection), creating one needs `admin` and `write` on the target
    /// object, `write` on the object the target lands in through references, and `read` on every object
    /// each source's key path passes through; each right is checked before anything else (a denial
    /// does not tell whether the objects exist). The binding then runs with its creator's rights
    /// (`creatorPolicy`), checked again at every application.
    public func bind(_ spec: BindingSpec, now: Bool, creator: ConnectionID?, access: ConnectionAccess? = nil,
                     notifications: inout [ChangeNotification]) throws(KVOError) -> UInt64 {
        let restricted = access.flatMap { $0.isUnrestricted ? nil : $0 }
        if let restricted {
            for source in spec.sources { try restricted.require(.read, on: source.object) }
            try restricted.require([.admin, .write], on: spec.target.object)
        }
        for endpoint in spec.sources + [spec.target] where !objects.contains(endpoint.object) {
            throw notFound(endpoint.object)
        }
        try spec.target.keyPath.requireWritable()
        try checkTargetIsStored(spec.target)
        if let restricted {
            // Where the target lands now, through references (a target that does not resolve yet is
            // checked at each application).
            do {
                let location = try WriteTarget.resolve(spec.target.keyPath, of: spec.target.object, in: objects,
                                                       classes: classes, access: restricted).location
                try restricted.require(.write, on: location.object)
            } catch where error.code == .forbidden {
                throw error
            } catch {}
        }
        guard bindingTable.lastID < KVOEngine.maximumCounter else {
            throw KVOError(.tooLarge, "binding ids have reached their maximum (\(KVOEngine.maximumCounter))")
        }
        // Counted against --max-memory as its definition (what is stored and listed).
        let size = JSONWriter.encodedLength(of: spec.json)
        try checkQuota(growth: size)
        let binding = try Binding(id: bindingTable.lastID + 1, spec: spec, creator: creator, creatorUser: access?.user)
        attach(binding)
        if let restricted, let path = binding.sourcePaths.first(where: { !restricted.allowsRead($0.dependencies) }) {
            detach(binding)
            throw refusal(reading: path.object, path.keyPath, for: restricted)
        }
        if let loop = cycle(through: binding) {
            detach(binding)
            throw KVOError(.cycle, "binding would form a cycle: \(loop.map(\.description).joined(separator: " -> "))")
        }
        bindingTable.lastID = binding.id
        bindingTable.add(binding)
        storedBytes += size
        if recordsCommitBatches { bindingTable.uncommitted[binding.id] = .some(binding.storedJSON) }
        if now {
            bindingTable.pending.append(binding)
            applyPendingBindings(notifications: &notifications)
        }
        return binding.id
    }

    /// Removes binding `id`; false (and nothing changes) when there is none, so removing twice is safe.
    public func unbind(_ id: UInt64) -> Bool {
        guard let binding = bindingTable.byID[id] else { return false }
        remove(binding)
        return true
    }

    /// `unbind` with `access`'s rights: removing a binding needs `admin` on its target object
    /// (`forbidden` otherwise, and nothing changes).
    public func unbind(_ id: UInt64, access: ConnectionAccess) throws(KVOError) -> Bool {
        guard let binding = bindingTable.byID[id] else { return false }
        try access.require(.admin, on: binding.spec.target.object)
        return unbind(id)
    }

    /// Every binding's definition with its id (`bindings`), by id; with `access`, only those whose
    /// target object it administers.
    public func bindingListings(access: ConnectionAccess? = nil) -> [JSONValue] {
        guard let access, !access.isUnrestricted else { return bindingTable.all.map(\.listing) }
        return bindingTable.all.filter { access.allows(.admin, on: $0.spec.target.object) }.map(\.listing)
    }

    /// The events for bindings' creators produced since the last call.
    public func takeBindingEvents() -> [BindingEvent] {
        defer { bindingTable.events.removeAll() }
        return bindingTable.events
    }

    // MARK: - Applying

    /// Applies every pending binding, including those that the writes of earlier ones make pending.
    /// Each binding writes at most `BindingTable.maximumApplicationsPerRequest` times per request.
    func applyPendingBindings(notifications: inout [ChangeNotification]) {
        guard !bindingTable.pending.isEmpty else { return }
        var next = 0
        while next < bindingTable.pending.count {
            let binding = bindingTable.pending[next]
            next += 1
            guard bindingTable.byID[binding.id] === binding else { continue }  // removed meanwhile
            apply(binding, notifications: &notifications)
        }
        bindingTable.pending.removeAll(keepingCapacity: true)
        for binding in bindingTable.appliedInRequest { binding.appliedInRequest = 0 }
        bindingTable.appliedInRequest.removeAll(keepingCapacity: true)
    }

    /// Reads the sources, runs `filter` and `convert`/`reduce`, and writes the target (validated like
    /// any write). A value equal to the target's is not written (no revision, no event). A refusal is
    /// reported to the creator, never thrown.
    private func apply(_ binding: Binding, notifications: inout [ChangeNotification]) {
        let access: ConnectionAccess?
        switch creatorAccess(of: binding) {
        case let .allowed(creatorAccess): access = creatorAccess
        case let .denied(object):
            stop(binding, forbiddenOn: object)
            return
        }
        let readings = binding.sourcePaths.map(currentReading)
        if let access {
            for (path, reading) in zip(binding.sourcePaths, readings) where !access.allowsRead(reading.dependencies) {
                stop(binding, forbiddenOn: firstRefused(reading: path.object, path.keyPath, for: access) ?? path.object)
                return
            }
        }
        let values = readings.map(\.value)
        let variables = binding.variables(values: values)
        let target = binding.spec.target
        do throws(KVOError) {
            if let filter = binding.filter,
               !Expression.isTruthy(try evaluate(filter, variables, field: "filter")) { return }
            let value = try binding.transform.map { expression throws(KVOError) in
                try evaluate(expression, variables, field: binding.spec.kind == .bind ? "convert" : "reduce")
            } ?? values[0]
            if let current = try? get(target.object, keyPath: target.keyPath), current == value { return }
            guard binding.appliedInRequest < BindingTable.maximumApplicationsPerRequest else {
                throw KVOError(.cycle, "binding \(binding.id) was applied \(BindingTable.maximumApplicationsPerRequest) times by one request: bindings loop through references; write not applied")
            }
            if binding.appliedInRequest == 0 { bindingTable.appliedInRequest.append(binding) }
            binding.appliedInRequest += 1
            _ = try write(target.object, keyPath: target.keyPath, value: value, access: access,
                          notifications: &notifications)
        } catch {
            if error.code == .forbidden {
                stop(binding, forbiddenOn: (error.details["object"]?.stringValue) ?? target.object)
                return
            }
            bindingTable.events.append(BindingEvent(binding: binding.id, creator: binding.creator,
                                                    reason: .refused(error), rev: revision))
        }
    }

    /// What looking up a binding's creator's rights found.
    enum CreatorRights {
        /// Apply with these checks (nil: unrestricted).
        case allowed(ConnectionAccess?)
        /// The creator has no rights any more (an unknown user): stop, naming this object.
        case denied(String)
    }

    /// The creator's current rights (`creatorPolicy`), reusing the binding's `ConnectionAccess` (and its
    /// cache) while the policy is the same object.
    func creatorAccess(of binding: Binding) -> CreatorRights {
        guard let policy = creatorPolicy(binding.creatorUser) else { return .denied(binding.spec.target.object) }
        if policy.isUnrestricted { return .allowed(nil) }
        if let current = binding.creatorAccess, current.principal.policy === policy { return .allowed(current) }
        let access = ConnectionAccess(Principal(user: binding.creatorUser, policy: policy))
        binding.creatorAccess = access
        return .allowed(access)
    }

    /// Ends `binding` because its creator may no longer read a source or write its target, and tells
    /// the creator (`removed`, cause `forbidden`, naming the object).
    func stop(_ binding: Binding, forbiddenOn object: String) {
        remove(binding)
        bindingTable.events.append(BindingEvent(binding: binding.id, creator: binding.creator,
                                                reason: .removed(cause: "forbidden", object: object), rev: revision))
    }

    /// Stops every binding created by `user` that the user's current rights no longer allow (after a
    /// change of those rights): its sources must stay readable and its target object writable. Also
    /// re-checked at each application; this tells the creator at once rather than at the next change.
    public func recheckBindings(ofUser user: String) {
        for binding in bindingTable.all where binding.creatorUser == user {
            switch creatorAccess(of: binding) {
            case let .denied(object):
                stop(binding, forbiddenOn: object)
            case let .allowed(access?):
                if let path = binding.sourcePaths.first(where: { !access.allowsRead($0.dependencies) }) {
                    stop(binding, forbiddenOn: firstRefused(reading: path.object, path.keyPath, for: access) ?? path.object)
                } else if !access.allows(.write, on: targetLocation(binding).object) {
                    stop(binding, forbiddenOn: targetLocation(binding).object)
                }
            case .allowed(nil):
                break
            }
        }
    }

    private func evaluate(_ expression: Expression, _ variables: [String: JSONValue],
                          field: String) throws(KVOError) -> JSONValue {
        do {
            // Binding expressions read no key paths (checked when compiled).
            return try expression.evaluate(variables: variables) { _ in .null }
        } catch {
            // A value over the size limit, or work over the budget: the write would be too large.
            let code: KVOError.Code = error.kind == .limit ? .tooLarge : .invalidExpression
            throw KVOError(code, "'\(field)': \(error)",
                           details: ["field": .string(field), "column": .int(Int64(error.column))])
        }
    }

    // MARK: - Sources, targets, cycles

    /// Registers `binding` at the watched path of each source.
    private func attach(_ binding: Binding) {
        binding.sourcePaths = binding.spec.sources.map { source in
            var reading: Evaluation?
            let (path, isNew) = registry.attach(binding, object: source.object, keyPath: source.keyPath) {
                reading = read(source.object, source.keyPath)
                return reading!.dependencies
            }
            if isNew, let reading {
                path.lastReading = reading
                path.aggregate = makeAggregateCache(for: path, reading: reading)
            }
            return path
        }
    }

    private func detach(_ binding: Binding) {
        for path in binding.sourcePaths { registry.detach(binding, from: path) }
        binding.sourcePaths = []
    }

    private func remove(_ binding: Binding) {
        detach(binding)
        bindingTable.remove(binding)
        storedBytes -= JSONWriter.encodedLength(of: binding.spec.json)
        // Record the removal as a nil definition (assigning nil through the subscript would drop the key).
        if recordsCommitBatches { bindingTable.uncommitted.updateValue(nil, forKey: binding.id) }
    }

    /// Refuses a target that is, or lies inside, a computed property, or is the reserved `$class` key
    /// (`read_only`). A target that does not resolve now for another reason (a missing intermediate
    /// key) is accepted: its writes are refused, and reported, until it resolves.
    private func checkTargetIsStored(_ target: BindingEndpoint) throws(KVOError) {
        let location: StoredLocation
        do {
            location = try WriteTarget.resolve(target.keyPath, of: target.object, in: objects, classes: classes).location
        } catch {
            if error.code == .readOnly { throw error }
            return
        }
        if location.path.first == ClassCatalog.classKey {
            throw KVOError(.readOnly, "'\(target)' cannot be a binding's target: '$class' is read-only",
                           details: ["property": .string(ClassCatalog.classKey)])
        }
    }

    /// Where a write to `binding`'s target lands (through references), or the key path as written when
    /// it does not resolve now.
    private func targetLocation(_ binding: Binding) -> StoredLocation {
        let target = binding.spec.target
        return (try? WriteTarget.resolve(target.keyPath, of: target.object, in: objects).location)
            ?? StoredLocation(object: target.object, path: target.keyPath.components)
    }

    /// The chain of bindings by which `start`'s write would reach `start` again, if there is one: a
    /// binding reaches another when its target location is one the other's sources read (the same
    /// tries that deliver writes tell which), directly or through computed properties.
    private func cycle(through start: Binding) -> [BindingEndpoint]? {
        var cameFrom: [ObjectIdentifier: Binding] = [:]
        var stack = [start]
        var seen: Set<ObjectIdentifier> = [ObjectIdentifier(start)]
        while let binding = stack.popLast() {
            for path in registry.watchers(affectedBy: targetLocation(binding)) {
                for next in path.bindings {
                    if next === start {
                        var chain = [binding]
                        while let previous = cameFrom[ObjectIdentifier(chain[0])] { chain.insert(previous, at: 0) }
                        return [start.spec.sources[0]] + chain.map(\.spec.target)
                    }
                    if seen.insert(ObjectIdentifier(next)).inserted {
                        cameFrom[ObjectIdentifier(next)] = binding
                        stack.append(next)
                    }
                }
            }
        }
        return nil
    }

    // MARK: - Deletion and restore

    /// After `object` was deleted: removes the bindings that read it (their watched paths `ended`) or
    /// write into it, and tells their creators.
    func removeBindings(endedWith ended: [WatchedPath], deletedObject object: String) {
        guard !bindingTable.isEmpty else { return }
        var removed: [(binding: Binding, cause: String)] = []
        func note(_ binding: Binding, _ cause: String) {
            if !removed.contains(where: { $0.binding === binding }) { removed.append((binding, cause)) }
        }
        for path in ended { for binding in path.bindings { note(binding, "sourceDeleted") } }
        for binding in bindingTable.targeting(object) { note(binding, "targetDeleted") }
        for (binding, cause) in removed.sorted(by: { $0.binding.id < $1.binding.id }) {
            remove(binding)
            bindingTable.events.append(BindingEvent(binding: binding.id, creator: binding.creator,
                                                    reason: .removed(cause: cause, object: object), rev: revision))
        }
    }

    /// Restores classes and bindings from disk (after the objects). What cannot be restored is skipped
    /// and described in `restoreProblems` (a skipped binding is also removed from disk).
    func restoreDefinitions(classes definitions: [String: JSONValue], bindings: [UInt64: JSONValue],
                            lastBindingID: UInt64) {
        for (name, json) in definitions.sorted(by: { $0.key < $1.key }) {
            do throws(KVOError) {
                let compiled = try CompiledClass(try ClassDefinition(json: json))
                try classes.add(compiled)
                storedBytes += JSONWriter.encodedLength(of: compiled.definition.json)
            } catch {
                restoreProblems.append("class '\(name)' not restored: \(error.message)")
            }
        }
        bindingTable.lastID = max(lastBindingID, bindings.keys.max() ?? 0)
        for (id, json) in bindings.sorted(by: { $0.key < $1.key }) {
            do throws(KVOError) {
                let spec = try BindingSpec(json: json)
                for endpoint in spec.sources + [spec.target] where !objects.contains(endpoint.object) {
                    throw notFound(endpoint.object)
                }
                let binding = try Binding(id: id, spec: spec, creator: nil, creatorUser: Binding.creatorUser(inStored: json))
                attach(binding)
                bindingTable.add(binding)
                storedBytes += JSONWriter.encodedLength(of: spec.json)
            } catch {
                restoreProblems.append("binding \(id) not restored: \(error.message)")
                if recordsCommitBatches { bindingTable.uncommitted.updateValue(nil, forKey: id) }
            }
        }
    }
}
