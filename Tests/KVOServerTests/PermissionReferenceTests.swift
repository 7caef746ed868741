import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Permissions across references, operators, computed properties, bindings and rule changes (issue 11,
/// "The reference cases"): key paths are checked object by object when they are resolved; a live
/// observation carried into an unreadable object ends with one `forbidden` event and never the value.
@Suite("permissions across references")
struct PermissionReferenceTests {
    let harness: PermissionHarness

    init() throws {
        harness = try PermissionHarness()
        try harness.setUp(#"{"op":"create","object":"cust-1","values":{"name":"Ada"}}"#)
        try harness.setUp(#"{"op":"create","object":"secret-1","values":{"name":"TOP SECRET"}}"#)
        try harness.setUp(#"{"op":"create","object":"order-1","values":{"customer":{"$ref":"cust-1"},"n":1}}"#)
    }

    /// Whether any notification to `client` carries `text` anywhere in its values.
    private func leaks(_ text: String, in notifications: [ChangeNotification], to client: PermissionHarness.Client) -> Bool {
        let needle = JSONValue.string(text)
        func contains(_ value: JSONValue) -> Bool {
            switch value {
            case needle: return true
            case let .array(items): return items.contains(where: contains)
            case let .object(members): return members.values.contains(where: contains)
            default: return false
            }
        }
        return notifications.contains { notification in
            notification.recipients.contains { $0.connection == client.id } && (contains(notification.old) || contains(notification.new))
        }
    }

    @Test("reading or observing through a reference needs read on the object it refers to")
    func observeThroughAReferenceIntoAForbiddenObject() throws {
        let user = try harness.connect("u", ["order-*=read"])
        let before = harness.snapshot
        expectEqual(harness.send(#"{"op":"get","object":"order-1","keyPath":"customer.name"}"#, as: user).error?.code, .forbidden)
        let observe = harness.send(#"{"op":"observe","object":"order-1","keyPath":"customer.name","options":["initial","new"]}"#, as: user)
        expectEqual(observe.error?.code, .forbidden)
        #expect(observe.notifications.isEmpty, "no initial value")
        expectEqual(harness.snapshot, before, "nothing subscribed")
        // The reference itself is in order-1, which the user may read.
        expectEqual(harness.send(#"{"op":"get","object":"order-1","keyPath":"customer"}"#, as: user).error, nil)

        let allowed = try harness.connect("v", ["order-*=read", "cust-*=read"])
        let outcome = harness.send(#"{"op":"observe","object":"order-1","keyPath":"customer.name","options":["initial","new"]}"#, as: allowed)
        expectEqual(outcome.error, nil)
        expectEqual(outcome.notifications.first?.new, "Ada")
    }

    @Test("re-pointing a reference mid-observation into a forbidden object ends the observation without the value")
    func repointIntoAForbiddenObject() throws {
        let user = try harness.connect("u", ["order-*=read", "cust-*=read"])
        let observe = harness.send(#"{"op":"observe","object":"order-1","keyPath":"customer.name","options":["new","old","prior"]}"#, as: user)
        let sub = try #require(observe.field("sub"))
        // The admin observes the same path: it shares the watched path and still hears the change.
        let adminObserve = try harness.setUp(#"{"op":"observe","object":"order-1","keyPath":"customer.name","options":["new"]}"#)
        let set = try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"customer","value":{"$ref":"secret-1"}}"#)

        let toUser = set.notifications.filter { $0.recipients.contains { $0.connection == user.id } }
        expectEqual(toUser.count, 1, "one final event, no prior")
        expectEqual(toUser.first?.reason, .forbidden)
        #expect(toUser.first?.old == .null && toUser.first?.new == .null)
        expectEqual(.int(toUser.first?.recipients.first?.subscription ?? 0), sub)
        #expect(!leaks("TOP SECRET", in: set.notifications, to: user))
        let toAdmin = set.notifications.filter { $0.recipients.contains { $0.connection == harness.admin.id } }
        #expect(toAdmin.map(\.reason) == [.pathChanged] && toAdmin.first?.new == "TOP SECRET")
        _ = adminObserve

        // The subscription has ended: later changes do not reach the user.
        let later = try harness.setUp(#"{"op":"set","object":"secret-1","keyPath":"name","value":"STILL SECRET"}"#)
        #expect(!later.notifications.contains { $0.recipients.contains { $0.connection == user.id } })
        let back = try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"customer","value":{"$ref":"cust-1"}}"#)
        #expect(!back.notifications.contains { $0.recipients.contains { $0.connection == user.id } })
    }

    @Test("revoking a right while an observation is live ends it with a forbidden event")
    func revokeWhileLive() throws {
        let user = try harness.connect("u", ["order-*=read", "cust-*=read"])
        try #require(harness.send(#"{"op":"observe","object":"order-1","keyPath":"customer.name"}"#, as: user).error == nil)
        try #require(harness.send(#"{"op":"observe","object":"order-1","keyPath":"n"}"#, as: user).error == nil)
        let ended = try harness.changeRules(of: user, to: ["order-*=read"])
        expectEqual(ended.map(\.reason), [.forbidden], "only the path through cust-1 ends")
        #expect(ended.first?.keyPath == "customer.name" && ended.first?.new == .null)
        let write = try harness.setUp(#"{"op":"set","object":"cust-1","keyPath":"name","value":"Eve"}"#)
        #expect(!write.notifications.contains { $0.recipients.contains { $0.connection == user.id } })
        let stillLive = try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"n","value":2}"#)
        #expect(stillLive.notifications.contains { $0.recipients.contains { $0.connection == user.id } })
        // Rights are cached per connection: the cache was emptied by the change.
        expectEqual(harness.send(#"{"op":"get","object":"cust-1"}"#, as: user).error?.code, .forbidden)
        let all = try harness.changeRules(of: user, to: [])
        expectEqual(all.map(\.keyPath), ["n"])
        expectEqual(harness.engine.observationCount, 0)
    }

    @Test("collection operators over references need read on every element they reach")
    func operatorsOverReferences() throws {
        try harness.setUp(#"{"op":"create","object":"item-1","values":{"price":3}}"#)
        try harness.setUp(#"{"op":"create","object":"secret-2","values":{"price":1000}}"#)
        try harness.setUp(#"{"op":"create","object":"cart-1","values":{"items":[{"$ref":"item-1"}]}}"#)
        let user = try harness.connect("u", ["cart-*=read", "item-*=read"])
        expectEqual(harness.send(#"{"op":"get","object":"cart-1","keyPath":"items.@sum.price"}"#, as: user).field("value"), 3)
        try #require(harness.send(#"{"op":"observe","object":"cart-1","keyPath":"items.@sum.price","options":["new"]}"#, as: user).error == nil)
        let insert = try harness.setUp(#"{"op":"insert","object":"cart-1","keyPath":"items","value":{"$ref":"secret-2"}}"#)
        let toUser = insert.notifications.filter { $0.recipients.contains { $0.connection == user.id } }
        expectEqual(toUser.map(\.reason), [.forbidden], "the sum would include an unreadable element")
        expectEqual(harness.send(#"{"op":"get","object":"cart-1","keyPath":"items.@sum.price"}"#, as: user).error?.code, .forbidden)
        #expect(harness.send(#"{"op":"get","object":"cart-1","keyPath":"items.@count"}"#, as: user).field("value") == 2,
                "@count reaches no element")
    }

    @Test("writes through references need write on the object written and read on the way")
    func writesThroughReferences() throws {
        let ownerOnly = try harness.connect("a", ["order-*=read,write"])
        let before = harness.snapshot
        expectEqual(harness.send(#"{"op":"set","object":"order-1","keyPath":"customer.name","value":"X"}"#, as: ownerOnly).error?.code, .forbidden)
        expectEqual(harness.snapshot, before)
        let writer = try harness.connect("b", ["order-*=read", "cust-*=write"])
        expectEqual(harness.send(#"{"op":"set","object":"order-1","keyPath":"customer.name","value":"X"}"#, as: writer).error, nil)
        expectEqual(harness.engine.objects["cust-1"]?.objectValue?["name"], "X")
        let blind = try harness.connect("c", ["order-*=write", "cust-*=write"])
        #expect(harness.send(#"{"op":"set","object":"order-1","keyPath":"customer.name","value":"Y"}"#, as: blind).error?.code == .forbidden,
                "following order-1's reference reads it")
        // A reference to a missing object: forbidden unless the user has some right on that id.
        try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"customer","value":{"$ref":"gone-1"}}"#)
        expectEqual(harness.send(#"{"op":"set","object":"order-1","keyPath":"customer.name","value":"Z"}"#, as: writer).error?.code, .forbidden)
        let gone = try harness.connect("d", ["order-*=read", "gone-*=write"])
        expectEqual(harness.send(#"{"op":"set","object":"order-1","keyPath":"customer.name","value":"Z"}"#, as: gone).error?.code, .notFound)
    }

    @Test("a computed property that reads another object is readable only with read on that object")
    func computedPropertyReadingAnotherObject() throws {
        try harness.setUp(#"{"op":"defineClass","class":{"name":"Customer","properties":{"name":{"type":"string"}}}}"#)
        try harness.setUp(#"{"op":"defineClass","class":{"name":"Order","properties":{"customer":{"type":"ref","class":"Customer"}},"computed":{"customerName":"customer.name"}}}"#)
        try harness.setUp(#"{"op":"create","object":"cust-c","class":"Customer","values":{"name":"Ada"}}"#)
        try harness.setUp(#"{"op":"create","object":"secret-c","class":"Customer","values":{"name":"TOP SECRET"}}"#)
        try harness.setUp(#"{"op":"create","object":"order-2","class":"Order","values":{"customer":{"$ref":"secret-c"}}}"#)
        let user = try harness.connect("u", ["order-*=read"])
        expectEqual(harness.send(#"{"op":"get","object":"order-2","keyPath":"customerName"}"#, as: user).error?.code, .forbidden)
        let observe = harness.send(#"{"op":"observe","object":"order-2","keyPath":"customerName","options":["initial","new"]}"#, as: user)
        #expect(observe.error?.code == .forbidden && observe.notifications.isEmpty)
        // Pointed at a readable customer, it reads; re-pointed at the secret, the observation ends.
        let reader = try harness.connect("w", ["order-*=read", "cust-*=read"])
        try harness.setUp(#"{"op":"set","object":"order-2","keyPath":"customer","value":{"$ref":"cust-c"}}"#)
        let live = harness.send(#"{"op":"observe","object":"order-2","keyPath":"customerName","options":["initial","new"]}"#, as: reader)
        #expect(live.error == nil && live.notifications.first?.new == "Ada")
        let repoint = try harness.setUp(#"{"op":"set","object":"order-2","keyPath":"customer","value":{"$ref":"secret-c"}}"#)
        expectEqual(repoint.notifications.filter { $0.recipients.contains { $0.connection == reader.id } }.map(\.reason), [.forbidden])
        #expect(!leaks("TOP SECRET", in: repoint.notifications, to: reader))
        // The admin, who may read everything, reads the value.
        expectEqual(harness.send(#"{"op":"get","object":"order-2","keyPath":"customerName"}"#).field("value"), "TOP SECRET")
    }

    @Test("a binding whose creator loses write stops and tells its creator")
    func bindingCreatorLosesWrite() throws {
        try harness.setUp(#"{"op":"create","object":"doc-1","values":{"v":1}}"#)
        try harness.setUp(#"{"op":"create","object":"doc-2","values":{"v":0}}"#)
        let creator = try harness.connect("c", ["doc-*=read,write,admin"])
        let bind = harness.send(#"{"op":"bind","from":{"object":"doc-1","keyPath":"v"},"to":{"object":"doc-2","keyPath":"v"},"now":true}"#, as: creator)
        expectEqual(bind.error, nil)
        expectEqual(harness.engine.objects["doc-2"]?.objectValue?["v"], 1)
        try harness.setUp(#"{"op":"set","object":"doc-1","keyPath":"v","value":2}"#)
        expectEqual(harness.engine.objects["doc-2"]?.objectValue?["v"], 2)

        // The creator's rules change (no connection of theirs involved): checked at the next application.
        harness.policies["c"] = AccessPolicy(rules: [try AccessRule(argument: "doc-1=read"), try AccessRule(argument: "doc-2=read,admin")])
        let revision = harness.engine.revision
        try harness.setUp(#"{"op":"set","object":"doc-1","keyPath":"v","value":3}"#)
        expectEqual(harness.engine.objects["doc-2"]?.objectValue?["v"], 2, "never written without the creator's write")
        expectEqual(harness.engine.revision, revision + 1)
        let events = harness.engine.takeBindingEvents()
        expectEqual(events.count, 1)
        expectEqual(events.first?.creator, creator.id)
        expectEqual(events.first?.reason, .removed(cause: "forbidden", object: "doc-2"))
        #expect(harness.engine.bindingListings().isEmpty, "the binding stopped")
    }

    @Test("a rule change stops the creator's bindings at once, and bindings persist their creator")
    func ruleChangeStopsBindings() throws {
        try harness.setUp(#"{"op":"create","object":"doc-1","values":{"v":1}}"#)
        try harness.setUp(#"{"op":"create","object":"doc-2","values":{"v":0}}"#)
        let creator = try harness.connect("c", ["doc-*=read,write,admin"])
        expectEqual(harness.send(#"{"op":"bind","from":{"object":"doc-1","keyPath":"v"},"to":{"object":"doc-2","keyPath":"v"}}"#, as: creator).error, nil)
        let batch = harness.engine.takeCommitBatch()
        expectEqual(batch.bindings.values.first??.objectValue?["creator"], "c", "the creator's user name is stored with the binding")
        _ = try harness.changeRules(of: creator, to: ["doc-2=read,write,admin"])
        expectEqual(harness.engine.takeBindingEvents().map(\.reason), [.removed(cause: "forbidden", object: "doc-1")])
        #expect(harness.engine.bindingListings().isEmpty)
    }

    @Test("creating a binding needs read on its sources' paths and write where the target lands")
    func bindingCreationFollowsReferences() throws {
        try harness.setUp(#"{"op":"create","object":"doc-1","values":{"ref":{"$ref":"secret-1"},"out":{"$ref":"secret-1"}}}"#)
        let creator = try harness.connect("c", ["doc-*=read,write,admin"])
        let before = harness.snapshot
        expectEqual(harness.send(#"{"op":"bind","from":{"object":"doc-1","keyPath":"ref.name"},"to":{"object":"doc-1","keyPath":"x"}}"#, as: creator).error?.code, .forbidden)
        expectEqual(harness.send(#"{"op":"bind","from":{"object":"doc-1","keyPath":"x"},"to":{"object":"doc-1","keyPath":"out.name"}}"#, as: creator).error?.code, .forbidden)
        expectEqual(harness.snapshot, before)
    }

    @Test("resuming never replays values read through an object the user may not read")
    func resumeThroughAForbiddenObject() throws {
        let user = try harness.connect("u", ["order-*=read", "cust-*=read"])
        let start = harness.engine.revision
        try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"customer","value":{"$ref":"secret-1"}}"#)
        try harness.setUp(#"{"op":"set","object":"order-1","keyPath":"customer","value":{"$ref":"cust-1"}}"#)
        let resume = harness.send(#"{"op":"observe","object":"order-1","keyPath":"customer.name","options":["new","old"],"sinceRev":\#(start)}"#, as: user)
        expectEqual(resume.error, nil)
        expectEqual(resume.notifications.map(\.reason), [.resync])
        expectEqual(resume.notifications.first?.new, "Ada")
        #expect(!leaks("TOP SECRET", in: resume.notifications, to: user))
    }
}
