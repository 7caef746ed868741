import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// One operation of the permission matrix: the request and the rights it needs.
struct MatrixOperation: Sendable, CustomTestStringConvertible {
    enum Needs: Sendable {
        /// These permissions on these objects.
        case on([(String, Permission)])
        /// `admin` on every object.
        case serverAdmin
        /// Nothing (answered to every authenticated connection).
        case nothing
    }

    let name: String
    let line: String
    let needs: Needs
    /// The error an allowed request still gets (a missing object), if any.
    var allowedError: KVOError.Code? = nil

    var testDescription: String { name }
}

/// One user of the matrix and their rules.
struct MatrixUser: Sendable, CustomTestStringConvertible {
    let name: String
    let rules: [String]
    var testDescription: String { "\(name) \(rules)" }
}

let matrixUsers: [MatrixUser] = [
    MatrixUser(name: "nobody", rules: []),
    MatrixUser(name: "reader", rules: ["doc-*=read"]),
    MatrixUser(name: "writer", rules: ["doc-*=write"]),
    MatrixUser(name: "exact", rules: ["doc-1=read,write"]),
    MatrixUser(name: "docadmin", rules: ["doc-*=read,write,admin"]),
    MatrixUser(name: "others", rules: ["other-*=read,write,admin"]),
    MatrixUser(name: "mixed", rules: ["doc-1=read", "doc-*=write", "*-2=admin"]),
    MatrixUser(name: "serveradmin", rules: ["*=read,write,admin"]),
]

let matrixOperations: [MatrixOperation] = [
    MatrixOperation(name: "get", line: #"{"op":"get","object":"doc-1"}"#, needs: .on([("doc-1", .read)])),
    MatrixOperation(name: "get keyPath", line: #"{"op":"get","object":"doc-1","keyPath":"v"}"#, needs: .on([("doc-1", .read)])),
    MatrixOperation(name: "get missing", line: #"{"op":"get","object":"doc-9"}"#, needs: .on([("doc-9", .read)]),
                    allowedError: .notFound),
    MatrixOperation(name: "get other", line: #"{"op":"get","object":"other-1","keyPath":"v"}"#,
                    needs: .on([("other-1", .read)])),
    MatrixOperation(name: "observe", line: #"{"op":"observe","object":"doc-1","keyPath":"v","options":["initial","new"]}"#,
                    needs: .on([("doc-1", .read)])),
    MatrixOperation(name: "observe sinceRev", line: #"{"op":"observe","object":"doc-1","keyPath":"v","sinceRev":1}"#,
                    needs: .on([("doc-1", .read)])),
    MatrixOperation(name: "info", line: #"{"op":"info","object":"doc-1"}"#, needs: .on([("doc-1", .read)])),
    MatrixOperation(name: "create", line: #"{"op":"create","object":"doc-3","values":{"v":1}}"#, needs: .on([("doc-3", .write)])),
    MatrixOperation(name: "create existing", line: #"{"op":"create","object":"doc-1"}"#, needs: .on([("doc-1", .write)]),
                    allowedError: .exists),
    MatrixOperation(name: "set", line: #"{"op":"set","object":"doc-1","keyPath":"v","value":5}"#, needs: .on([("doc-1", .write)])),
    MatrixOperation(name: "set missing", line: #"{"op":"set","object":"doc-9","keyPath":"v","value":5}"#,
                    needs: .on([("doc-9", .write)]), allowedError: .notFound),
    MatrixOperation(name: "insert", line: #"{"op":"insert","object":"doc-1","keyPath":"items","value":9}"#,
                    needs: .on([("doc-1", .write)])),
    MatrixOperation(name: "remove", line: #"{"op":"remove","object":"doc-1","keyPath":"items","index":0}"#,
                    needs: .on([("doc-1", .write)])),
    MatrixOperation(name: "replace", line: #"{"op":"replace","object":"doc-1","keyPath":"items","index":0,"value":7}"#,
                    needs: .on([("doc-1", .write)])),
    MatrixOperation(name: "delete", line: #"{"op":"delete","object":"doc-1"}"#, needs: .on([("doc-1", .write)])),
    MatrixOperation(name: "defineClass", line: #"{"op":"defineClass","class":{"name":"Thing","properties":{"n":{"type":"number"}}}}"#,
                    needs: .serverAdmin),
    MatrixOperation(name: "bind", line: #"{"op":"bind","from":{"object":"doc-1","keyPath":"v"},"to":{"object":"doc-2","keyPath":"x"},"now":true}"#,
                    needs: .on([("doc-1", .read), ("doc-2", [.admin, .write])])),
    MatrixOperation(name: "combineLatest",
                    line: #"{"op":"combineLatest","sources":[{"object":"doc-1","keyPath":"v"},{"object":"doc-2","keyPath":"w"}],"to":{"object":"doc-2","keyPath":"y"},"reduce":"$0 + $1","now":true}"#,
                    needs: .on([("doc-1", .read), ("doc-2", [.read, .admin, .write])])),
    MatrixOperation(name: "unbind", line: #"{"op":"unbind","binding":1}"#, needs: .on([("doc-2", .admin)])),
    MatrixOperation(name: "classes", line: #"{"op":"classes"}"#, needs: .nothing),
    MatrixOperation(name: "ping", line: #"{"op":"ping"}"#, needs: .nothing),
    MatrixOperation(name: "list", line: #"{"op":"list"}"#, needs: .nothing),
    MatrixOperation(name: "bindings", line: #"{"op":"bindings"}"#, needs: .nothing),
]

/// Every operation, allowed and denied, for read, write and admin rules given as exact ids and globs
/// (issue 11, "A permission matrix"): an allowed request is carried out; a denied one is `forbidden`,
/// changes nothing (objects, revision, classes, bindings, observations) and tells no observer anything.
@Suite("permission matrix")
struct PermissionMatrixTests {
    /// doc-1 (read by `v` observers), doc-2 (target of binding 1), other-1; the admin observes each.
    static func harness() throws -> PermissionHarness {
        let harness = try PermissionHarness()
        try harness.setUp(#"{"op":"create","object":"doc-1","values":{"v":1,"items":[1,2,3]}}"#)
        try harness.setUp(#"{"op":"create","object":"doc-2","values":{"w":2}}"#)
        try harness.setUp(#"{"op":"create","object":"other-1","values":{"v":3}}"#)
        try harness.setUp(#"{"op":"bind","from":{"object":"doc-1","keyPath":"v"},"to":{"object":"doc-2","keyPath":"copy"}}"#)
        for (object, keyPath) in [("doc-1", "v"), ("doc-1", "items"), ("doc-2", "w"), ("doc-2", "x"), ("other-1", "v")] {
            try harness.setUp(#"{"op":"observe","object":"\#(object)","keyPath":"\#(keyPath)"}"#)
        }
        return harness
    }

    @Test("allowed and denied", arguments: matrixUsers, matrixOperations)
    func matrix(user: MatrixUser, operation: MatrixOperation) throws {
        let harness = try PermissionMatrixTests.harness()
        let client = try harness.connect(user.name, user.rules)
        let policy = client.access.principal.policy
        let allowed: Bool
        switch operation.needs {
        case let .on(needs): allowed = needs.allSatisfy { policy.allows($0.1, on: $0.0) }
        case .serverAdmin: allowed = policy.isServerAdmin
        case .nothing: allowed = true
        }
        let before = harness.snapshot
        let outcome = harness.send(operation.line, as: client)
        if allowed {
            expectEqual(outcome.error?.code, operation.allowedError, "\(outcome.error?.message ?? "")")
        } else {
            expectEqual(outcome.error?.code, .forbidden)
            expectEqual(harness.snapshot, before, "a denial changes nothing")
            #expect(outcome.notifications.isEmpty, "a denial tells no observer anything")
            #expect(harness.engine.takeBindingEvents().isEmpty)
        }
    }

    @Test("list shows only readable ids, and pages over them")
    func listIsFiltered() throws {
        let harness = try PermissionMatrixTests.harness()
        for index in 0..<20 { try harness.setUp(#"{"op":"create","object":"doc-p\#(index)"}"#) }
        let reader = try harness.connect("r", ["doc-p1*=read", "other-1=write"])
        var seen: [String] = []
        var after: String?
        var pages = 0
        repeat {
            let line = after.map { #"{"op":"list","limit":3,"after":"\#($0)"}"# } ?? #"{"op":"list","limit":3}"#
            let outcome = harness.send(line, as: reader)
            guard case let .array(ids)? = outcome.field("objects") else { Issue.record("no objects"); return }
            let page = ids.compactMap(\.stringValue)
            seen += page
            after = page.last
            pages += 1
            if outcome.field("more") != .bool(true) { break }
        } while after != nil && pages < 20
        expectEqual(seen, ["doc-p1"] + (10..<20).map { "doc-p\($0)" })
        let all = harness.send(#"{"op":"list"}"#, as: try harness.connect("n", []))
        expectEqual(all.field("objects"), .array([]))
    }

    @Test("info shows other users' connection ids only to server admins")
    func infoHidesOtherConnections() throws {
        let harness = try PermissionMatrixTests.harness()
        let alice = try harness.connect("alice", ["doc-*=read"])
        try #require(harness.send(#"{"op":"observe","object":"doc-1","keyPath":"v"}"#, as: alice).error == nil)
        guard case let .array(seenByAlice)? = harness.send(#"{"op":"info","object":"doc-1"}"#, as: alice).field("observers"),
              case let .array(seenByAdmin)? = harness.send(#"{"op":"info","object":"doc-1"}"#).field("observers")
        else { Issue.record("no observers"); return }
        #expect(seenByAlice.count == 3 && seenByAdmin.count == 3)
        let connectionsSeenByAlice = seenByAlice.compactMap { $0.objectValue?["connection"] }
        expectEqual(connectionsSeenByAlice, [.int(Int64(alice.id.rawValue))], "only her own connection")
        #expect(seenByAdmin.allSatisfy { $0.objectValue?["connection"] != nil })
    }

    @Test("bindings lists only bindings whose target the user administers")
    func bindingsAreFiltered() throws {
        let harness = try PermissionMatrixTests.harness()
        try harness.setUp(#"{"op":"bind","from":{"object":"doc-1","keyPath":"v"},"to":{"object":"other-1","keyPath":"copy"}}"#)
        func listed(_ client: PermissionHarness.Client) -> Int {
            guard case let .array(bindings)? = harness.send(#"{"op":"bindings"}"#, as: client).field("bindings") else { return -1 }
            return bindings.count
        }
        expectEqual(listed(try harness.connect("d", ["doc-*=read,write,admin"])), 1)
        expectEqual(listed(try harness.connect("o", ["other-*=admin"])), 1)
        expectEqual(listed(try harness.connect("r", ["*=read,write"])), 0)
        expectEqual(listed(harness.admin), 2)
    }

    @Test("open mode allows everything")
    func openMode() throws {
        let harness = try PermissionMatrixTests.harness()
        let open = PermissionHarness.Client(id: ConnectionID(50), access: ConnectionAccess.open())
        for operation in matrixOperations {
            let fresh = try PermissionMatrixTests.harness()
            expectEqual(fresh.send(operation.line, as: open).error?.code, operation.allowedError, "\(operation.name)")
        }
        _ = harness
    }
}
