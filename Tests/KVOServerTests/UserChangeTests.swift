import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// User changes as the cluster's stream carries them: every kind round-trips through its stream form
/// and inside a replication entry, applies to a directory as the admin operations do, and a forged or
/// damaged change (bad name, a hash that is not Argon2id, bad rules or token, unknown kind) is refused
/// rather than installed.
@Suite("user changes")
struct UserChangeTests {
    private let hash = try! PasswordHasher.hash("pw", cost: .minimal)
    private let rules = [try! AccessRule(json: ["objects": "doc-*", "allow": ["read"]])]

    @Test("every kind round-trips, alone and in a replication entry")
    func roundTrips() throws {
        let token = APIToken.generate().token
        let changes: [UserChange] = [
            .add(user: "ada", passwordHash: hash, rules: rules), .remove(user: "ada"),
            .setPassword(user: "ada", passwordHash: hash), .grant(user: "ada", rules: rules),
            .revoke(user: "ada", rules: rules), .addToken(user: "ada", token: token),
            .revokeToken(user: "ada", tokenID: token.id),
        ]
        for change in changes { #expect(try UserChange(json: change.json) == change) }
        let entry = ReplicationEntry(version: KVOEngine.replicationVersion, node: "a", batch: "a.x.1", operations:
            changes.map { .init(line: [], user: "root", userChange: $0) }
            + [.init(line: Array(#"{"op":"create","object":"p"}"#.utf8), user: "root")])
        expectEqual(try ReplicationEntry.decode(entry.encoded()), entry)
    }

    @Test("applies like the admin operations; a change that does not apply changes nothing")
    func applies() throws {
        let directory = UserDirectory()
        try UserChange.add(user: "ada", passwordHash: hash, rules: rules).apply(to: directory)
        #expect(throws: UserDirectoryError.self) { try UserChange.add(user: "ada", passwordHash: hash, rules: []).apply(to: directory) }
        expectEqual(directory.user(named: "ada")?.rules, rules)
        let made = APIToken.generate()
        try UserChange.addToken(user: "ada", token: made.token).apply(to: directory)
        expectEqual(directory.user(presentingToken: made.text)?.name, "ada")
        // The same token id again (a replayed or forged entry) is refused, not added twice.
        #expect(throws: UserDirectoryError.self) { try UserChange.addToken(user: "ada", token: made.token).apply(to: directory) }
        expectEqual(directory.user(named: "ada")?.tokens.count, 1)
        try UserChange.revokeToken(user: "ada", tokenID: made.token.id).apply(to: directory)
        expectEqual(directory.user(presentingToken: made.text), nil)
        try UserChange.remove(user: "ada").apply(to: directory)
        #expect(throws: UserDirectoryError.self) { try UserChange.remove(user: "ada").apply(to: directory) }
        #expect(directory.isEmpty)
    }

    @Test("forged or damaged changes are refused", arguments: [
        #"{"change":"add","user":"ada","passwordHash":"plain","rules":[]}"#,
        #"{"change":"add","user":"a b","passwordHash":"$argon2id$x","rules":[]}"#,
        #"{"change":"add","user":"ada","rules":[]}"#,
        #"{"change":"grant","user":"ada","rules":[{"objects":"*","allow":["fly"]}]}"#,
        #"{"change":"grant","user":"ada","rules":"*=admin"}"#,
        #"{"change":"tokenAdd","user":"ada","token":{"id":"zz","hash":"00"}}"#,
        #"{"change":"tokenRevoke","user":"ada"}"#,
        #"{"change":"promote","user":"ada"}"#,
        #"{"user":"ada"}"#,
        #"["add","ada"]"#,
    ])
    func refusesForgeries(_ text: String) throws {
        let json = try JSONParser.parse(Array(text.utf8))
        #expect(throws: UserDirectoryError.self) { try UserChange(json: json) }
        let line = #"{"v":3,"node":"a","batch":"b","ops":[{"users":"#+text+#","user":"root"}]}"#
        #expect(throws: ReplicationEntryError.self) { try ReplicationEntry.decode(Array(line.utf8)) }
    }
}
