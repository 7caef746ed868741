import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The operations table (`OperationTable`) is the one declaration of each operation: these tests walk every
/// row and check that what it declares is what the server does. The write flag is checked against the
/// engine's replicated state (a row that says it reads but changes the state, or says it writes and changes
/// nothing, fails), the admission rule against real users, the example against the decoder.
@Suite struct OperationTableTests {
    @Test("every operation is found by its wire name, names are unique, and nothing else is found")
    func names() {
        var seen = Set<String>()
        for operation in ProtocolOperation.allCases {
            expectEqual(ProtocolOperation(named: operation.name), operation)
            #expect(seen.insert(operation.name).inserted, "\(operation.name) appears twice")
        }
        for unknown in ["", "SET", "Set", "set ", "sets", "frobnicate", "incrementBy", "user", "hello\u{0}"] {
            expectEqual(ProtocolOperation(named: unknown), nil, "\(unknown)")
        }
    }

    @Test("every row's example decodes to a request of that very operation", arguments: ProtocolOperation.allCases)
    func exampleDecodes(operation: ProtocolOperation) {
        let decoded = RequestDecoder.decode(Array(operation.declaration.example.utf8))
        switch decoded.request {
        case let .success(request): #expect(request.operation == operation)
        case let .failure(error): Issue.record("\(operation.name)'s example does not decode: \(error)")
        }
    }

    @Test("only rows marked beforeLogin are decoded before a login; the others are refused unseen",
          arguments: ProtocolOperation.allCases)
    func beforeLogin(operation: ProtocolOperation) {
        let bytes = Array(operation.declaration.example.utf8)
        let decoded = bytes.withUnsafeBufferPointer { RequestDecoder.decodeBeforeLogin($0) }
        if operation.declaration.beforeLogin {
            if case let .failure(error) = decoded.request { Issue.record("\(operation.name): \(error)") }
        } else {
            expectEqual(decoded.request, Result<Request, KVOError>.failure(RequestDecoder.loginRequired))
        }
    }

    @Test("atLeastRev is accepted exactly by the rows that say so", arguments: ProtocolOperation.allCases)
    func atLeastRev(operation: ProtocolOperation) {
        var line = operation.declaration.example
        line.removeLast()
        line += #","atLeastRev":0}"#
        let decoded = RequestDecoder.decode(Array(line.utf8))
        if operation.declaration.acceptsAtLeastRev {
            expectEqual(decoded.atLeastRev, 0)
            if case let .failure(error) = decoded.request { Issue.record("\(operation.name): \(error)") }
        } else if case let .failure(error) = decoded.request {
            #expect(error.code == .badRequest && error.message.hasPrefix("'atLeastRev' goes with get, list, info and observe only"))
        } else {
            Issue.record("\(operation.name) took atLeastRev")
        }
    }

    /// `line` (a row's example) with `fields` (`"name":value,…`) added before its closing brace.
    private static func adding(_ fields: String, to line: String) -> String {
        var line = line
        line.removeLast()
        return line + "," + fields + "}"
    }

    @Test("write conditions are accepted exactly by the rows that say so, and only rows that write one object say so",
          arguments: ProtocolOperation.allCases)
    func conditionsAccepted(operation: ProtocolOperation) {
        let declaration = operation.declaration
        let decoded = RequestDecoder.decode(Array(Self.adding(#""ifExists":true"#, to: declaration.example).utf8))
        if declaration.modifiers.contains(.conditions) {
            #expect(declaration.isWrite && declaration.requirement == .writeObjects && declaration.route == .engine)
            guard case let .success(.modified(modifiers, request)) = decoded.request, let conditions = modifiers.conditions else {
                Issue.record("\(operation.name): \(decoded.request)")
                return
            }
            #expect(conditions.existence == .mustExist && request.operation == operation && request.writtenObject != nil)
        } else if case let .failure(error) = decoded.request {
            #expect(error.code == .badRequest && error.message.hasPrefix("'ifExists', 'ifAbsent', 'ifEquals' and 'ifRev' go with"), "\(error)")
        } else {
            Issue.record("\(operation.name) took a write condition")
        }
    }

    @Test("ttl is accepted exactly by the rows that say so, and on each of them gives the written object that time to live",
          arguments: ProtocolOperation.allCases)
    func ttlAccepted(operation: ProtocolOperation) throws {
        let declaration = operation.declaration
        let line = Self.adding(#""ttl":5"#, to: declaration.example)
        let decoded = RequestDecoder.decode(Array(line.utf8))
        guard declaration.modifiers.contains(.ttl) else {
            guard case let .failure(error) = decoded.request else {
                Issue.record("\(operation.name) took a ttl")
                return
            }
            expectEqual(error.code, .badRequest, "\(error)")
            return
        }
        #expect(declaration.isWrite && declaration.requirement == .writeObjects && declaration.route == .engine)
        guard case let .success(.modified(modifiers, request)) = decoded.request, let ttl = modifiers.ttl,
              let object = request.writtenObject else {
            Issue.record("\(operation.name): \(decoded.request)")
            return
        }
        #expect(ttl == 5_000 && request.operation == operation)
        let (engine, handler) = try Self.preparedEngine()
        var notifications: [ChangeNotification] = []
        let outcome = handler.handle(try Self.request(line), from: ConnectionID(1), access: .open(), notifications: &notifications)
        if case let .failure(error) = outcome.reply { Issue.record("\(operation.name): \(error)") }
        expectEqual(engine.expiry(of: object), Expiry(ttl: 5_000, deadline: engine.writeTime + 5_000))
    }

    @Test("on every conditional row, a condition that fails refuses the write with conflict and changes nothing; one that holds lets it apply",
          arguments: ProtocolOperation.allCases.filter { $0.declaration.modifiers.contains(.conditions) })
    func conditionsGuardEveryConditionalRow(operation: ProtocolOperation) throws {
        let example = operation.declaration.example
        let holding = operation == .create ? #""ifAbsent":true"# : #""ifEquals":{"keyPath":"n","value":1.0}"#
        let failing = operation == .create ? #""ifExists":true"# : #""ifEquals":{"keyPath":"n","value":2}"#
        let (engine, handler) = try Self.preparedEngine()
        var notifications: [ChangeNotification] = []
        let before = StateDigest.of(engine, users: nil)
        let refused = handler.handle(try Self.request(Self.adding(failing, to: example)), from: ConnectionID(1), access: .open(),
                                     notifications: &notifications)
        guard case let .failure(error) = refused.reply else {
            Issue.record("\(operation.name) applied although its condition failed")
            return
        }
        #expect(error.code == .conflict && error.details["rev"] == .int(Int64(engine.revision)), "\(error)")
        #expect(StateDigest.of(engine, users: nil) == before && notifications.isEmpty)
        let applied = handler.handle(try Self.request(Self.adding(holding, to: example)), from: ConnectionID(1), access: .open(),
                                     notifications: &notifications)
        if case let .failure(error) = applied.reply { Issue.record("\(operation.name): \(error)") }
        #expect(StateDigest.of(engine, users: nil) != before)
    }

    @Test("a batch holds exactly the rows that say so: each applies inside one, and undoes with it when a later part is refused",
          arguments: ProtocolOperation.allCases)
    func batchHoldsExactlyTheBatchableRows(operation: ProtocolOperation) throws {
        let declaration = operation.declaration
        let part = declaration.example
        let decoded = RequestDecoder.decode(Array(#"{"op":"batch","ops":[\#(part)]}"#.utf8))
        guard declaration.batchable else {
            guard case let .failure(error) = decoded.request else {
                Issue.record("\(operation.name) was taken into a batch")
                return
            }
            #expect(error.code == .badRequest && error.details["part"] == 0, "\(error)")
            return
        }
        #expect(declaration.isWrite && declaration.requirement == .writeObjects && declaration.route == .engine
                && declaration.modifiers.contains(.conditions))
        let (engine, handler) = try Self.preparedEngine()
        var notifications: [ChangeNotification] = []
        let before = StateDigest.of(engine, users: nil)
        let revision = engine.revision
        // The row's write, then one that fails: nothing of the first stays.
        let refused = handler.handle(try Self.request(#"{"op":"batch","ops":[\#(part),{"op":"delete","object":"missing"}]}"#),
                                     from: ConnectionID(1), access: .open(), notifications: &notifications)
        guard case let .failure(error) = refused.reply else {
            Issue.record("\(operation.name): a batch with a refused part applied")
            return
        }
        #expect(error.code == .notFound && error.details["part"] == 1, "\(error)")
        #expect(StateDigest.of(engine, users: nil) == before && notifications.isEmpty && engine.revision == revision)
        let applied = handler.handle(try Self.request(#"{"op":"batch","ops":[\#(part)]}"#), from: ConnectionID(1), access: .open(),
                                     notifications: &notifications)
        if case let .failure(error) = applied.reply { Issue.record("\(operation.name): \(error)") }
        #expect(StateDigest.of(engine, users: nil) != before && engine.history.entries(after: revision, current: engine.revision)?.first?.rev == revision + 1)
    }

    /// The rows the engine answers (`route == .engine`): the others are the server's (auth, user administration).
    static let engineOperations = ProtocolOperation.allCases.filter { $0.declaration.route == .engine }

    @Test("the write flag is the truth: a row's example changes the replicated state (the digest) exactly when the row says it writes",
          arguments: engineOperations)
    func writeFlagIsTruthful(operation: ProtocolOperation) throws {
        let (engine, handler) = try Self.preparedEngine()
        let before = StateDigest.of(engine, users: nil)
        let request = try Self.request(operation)
        var notifications: [ChangeNotification] = []
        let outcome = handler.handle(request, from: ConnectionID(1), access: .open(), notifications: &notifications)
        if case let .failure(error) = outcome.reply { Issue.record("\(operation.name)'s example failed: \(error)") }
        let changed = StateDigest.of(engine, users: nil) != before
        #expect(changed == operation.declaration.isWrite,
                "\(operation.name) is declared \(operation.declaration.effect) but \(changed ? "changed" : "did not change") the state")
    }

    @Test("server-admin rows refuse any other user before anything happens, and admit a server admin",
          arguments: engineOperations.filter { $0.declaration.requirement == .serverAdmin })
    func serverAdminRows(operation: ProtocolOperation) throws {
        let (engine, handler) = try Self.preparedEngine()
        let before = StateDigest.of(engine, users: nil)
        let request = try Self.request(operation)
        var notifications: [ChangeNotification] = []
        let writer = ConnectionAccess(Principal(user: "w", policy: AccessPolicy(rules: [try AccessRule(argument: "*=read,write")])))
        let refused = handler.handle(request, from: ConnectionID(2), access: writer, notifications: &notifications)
        guard case let .failure(error) = refused.reply else {
            Issue.record("\(operation.name) admitted a user without admin")
            return
        }
        expectEqual(error.code, .forbidden)
        #expect(error.message.hasPrefix("\(operation.name) needs 'admin' on every object"))
        expectEqual(StateDigest.of(engine, users: nil), before)
        #expect(notifications.isEmpty)
        let admin = ConnectionAccess(Principal(user: "a", policy: AccessPolicy(rules: [try AccessRule(argument: "*=admin")])))
        let admitted = handler.handle(request, from: ConnectionID(3), access: admin, notifications: &notifications)
        if case let .failure(error) = admitted.reply { Issue.record("\(operation.name) refused a server admin: \(error)") }
    }

    @Test("a replicated user change is admitted as the operation that made it")
    func userChangesMapToTheirRows() throws {
        let rule = try AccessRule(argument: "x=read")
        let changes: [(UserChange, ProtocolOperation)] = [
            (.add(user: "u", passwordHash: "h", rules: []), .userAdd), (.remove(user: "u"), .userRemove),
            (.setPassword(user: "u", passwordHash: "h"), .userPasswd), (.grant(user: "u", rules: [rule]), .userGrant),
            (.revoke(user: "u", rules: [rule]), .userRevoke), (.revokeToken(user: "u", tokenID: "t"), .tokenRevoke),
        ]
        for (change, operation) in changes {
            expectEqual(change.operation, operation)
            #expect(operation.declaration.route == .administration && operation.declaration.isWrite)
        }
        #expect(ProtocolOperation.userList.declaration.route == .administration && !ProtocolOperation.userList.declaration.isWrite)
    }

    @Test("every row has its own metrics label or one it shares on purpose")
    func metricsLabels() {
        for operation in ProtocolOperation.allCases {
            let label = operation.declaration.metrics
            switch operation.declaration.route {
            case .administration: #expect(label == .admin)
            case .authentication, .engine, .presence, .serverState, .storage:
                // combineLatest is counted with bind, every other engine operation under its own name.
                expectEqual(label.name, (operation == .combineLatest ? "bind" : operation.name), "\(operation.name)")
            }
        }
    }

    // MARK: - Support

    /// An engine with what every example refers to: object `o` (`n`, `m`, `list`, `sum`), binding 1 and
    /// observation 1.
    static func preparedEngine() throws -> (KVOEngine, RequestHandler) {
        let engine = KVOEngine(historyLimit: 100, historyByteLimit: 1 << 20)
        let handler = RequestHandler(engine: engine)
        var notifications: [ChangeNotification] = []
        for line in [
            // With a time to live that is over by the time the examples run (`expire`'s and `touch`'s examples).
            #"{"op":"create","object":"o","values":{"n":1,"m":2,"list":["a"],"sum":0},"ttl":1}"#,
            #"{"op":"bind","from":{"object":"o","keyPath":"m"},"to":{"object":"o","keyPath":"copy"}}"#,
            #"{"op":"observe","object":"o","keyPath":"n"}"#,
        ] {
            let outcome = handler.handle(try request(line), from: ConnectionID(1), access: .open(), notifications: &notifications)
            if case let .failure(error) = outcome.reply { throw error }
        }
        engine.writeTime = 10_000
        return (engine, handler)
    }

    static func request(_ operation: ProtocolOperation) throws -> Request {
        try request(operation.declaration.example)
    }

    static func request(_ line: String) throws -> Request {
        try RequestDecoder.decode(Array(line.utf8)).request.get()
    }
}
