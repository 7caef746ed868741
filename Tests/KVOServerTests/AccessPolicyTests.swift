import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// Object id globs and compiled access policies (issue 11, permissions): which ids a pattern names,
/// the union of matching rules, default deny, and the rule forms on the wire and the command line.
@Suite("access policy")
struct AccessPolicyTests {
    private func pattern(_ text: String) throws -> ObjectIDPattern { try ObjectIDPattern(text) }

    @Test("exact patterns name one id")
    func exactPatterns() throws {
        let exact = try pattern("order-1")
        #expect(exact.isExact)
        #expect(exact.matches("order-1"))
        #expect(!exact.matches("order-10"))
        #expect(!exact.matches("order-"))
        #expect(!exact.matches(""))
    }

    @Test("a star stands for any run, none included", arguments: [
        ("sensor-*", "sensor-", true), ("sensor-*", "sensor-12", true), ("sensor-*", "sensor", false),
        ("sensor-*", "xsensor-1", false), ("*-draft", "a-draft", true), ("*-draft", "-draft", true),
        ("*-draft", "a-draft2", false), ("user-*-profile", "user-7-profile", true),
        ("user-*-profile", "user--profile", true), ("user-*-profile", "user-profile", false),
        ("a*b*c", "abc", true), ("a*b*c", "aXbYc", true), ("a*b*c", "acb", false), ("a*b*c", "abcbc", true),
        ("*", "", true), ("*", "anything", true), ("**", "x", true), ("a*a", "a", false), ("a*a", "aa", true),
        ("*é*", "café", true), ("*é*", "cafe", false),
    ])
    func globs(pattern text: String, id: String, expected: Bool) throws {
        expectEqual(try pattern(text).matches(id), expected)
    }

    @Test("empty and overlong patterns are refused")
    func refusedPatterns() {
        #expect(throws: ObjectIDPattern.ParseError.empty) { try ObjectIDPattern("") }
        #expect(throws: ObjectIDPattern.ParseError.tooLong(limit: ObjectIDPattern.maximumLength)) {
            try ObjectIDPattern(String(repeating: "a", count: ObjectIDPattern.maximumLength + 1))
        }
    }

    @Test("a policy allows the union of matching rules and denies by default")
    func unionAndDefaultDeny() throws {
        let policy = AccessPolicy(rules: [
            AccessRule(objects: try pattern("sensor-*"), allow: .read),
            AccessRule(objects: try pattern("sensor-7"), allow: .write),
            AccessRule(objects: try pattern("*-draft"), allow: [.read, .write]),
        ])
        expectEqual(policy.permissions(for: "sensor-7"), [.read, .write])
        expectEqual(policy.permissions(for: "sensor-1"), .read)
        expectEqual(policy.permissions(for: "sensor-draft"), [.read, .write])
        expectEqual(policy.permissions(for: "order-1"), [])
        #expect(!policy.allows(.admin, on: "sensor-7"))
        #expect(!policy.isServerAdmin)
        #expect(!AccessPolicy(rules: []).allows(.read, on: "x"))
    }

    @Test("server-wide administration needs admin on *; open mode allows everything")
    func serverAdmin() throws {
        #expect(AccessPolicy(rules: [AccessRule(objects: try pattern("*"), allow: .admin)]).isServerAdmin)
        #expect(!AccessPolicy(rules: [AccessRule(objects: try pattern("a*"), allow: .admin)]).isServerAdmin)
        #expect(AccessPolicy.unrestricted.isServerAdmin)
        expectEqual(AccessPolicy.unrestricted.permissions(for: "anything"), .all)
    }

    @Test("rules parse from JSON and from PATTERN=PERMS, and say what is wrong")
    func ruleForms() throws {
        let rule = try AccessRule(argument: "sensor-*=read,write")
        expectEqual(rule.objects.text, "sensor-*")
        expectEqual(rule.allow, [.read, .write])
        expectEqual(try AccessRule(json: rule.json), rule)
        expectEqual(try AccessRule(argument: "a=b=admin").objects.text, "a=b")
        for bad in ["sensor-*", "=read", "x=", "x=read,own"] {
            #expect(throws: AccessRuleError.self) { try AccessRule(argument: bad) }
        }
        #expect(throws: AccessRuleError.self) { try AccessRule(json: .object(["objects": "x", "allow": ["read"], "extra": 1])) }
        #expect(throws: AccessRuleError.self) { try AccessRule(json: .array([])) }
    }
}
