import Testing
@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer
import KVOJSON

/// Users as kvod keeps them (issue 11, identity): names, the users file form, grant and revoke,
/// password hashes (Argon2id through libsodium), and how password checks are scheduled by recent
/// failures.
@Suite("users and passwords")
struct UserDirectoryTests {
    private func rules(_ words: String...) throws -> [AccessRule] { try words.map { try AccessRule(argument: $0) } }

    @Test("a password hash verifies its password only, and is salted")
    func passwordHashes() throws {
        let hash = try PasswordHasher.hash("secret", cost: .minimal)
        #expect(hash.hasPrefix("$argon2id$"))
        #expect(PasswordHasher.verify("secret", against: hash))
        #expect(!PasswordHasher.verify("Secret", against: hash))
        #expect(!PasswordHasher.verify("", against: hash))
        #expect(try PasswordHasher.hash("secret", cost: .minimal) != hash, "a fresh salt each time")
        #expect(throws: PasswordHasher.HashError.emptyPassword) { _ = try PasswordHasher.hash("", cost: .minimal) }
        #expect(!PasswordHasher.verify("secret", against: "not a hash"))
    }

    @Test("user names: letters, digits and . _ - @, at most 64 bytes")
    func names() {
        expectEqual(UserRecord.problem(withName: "alice.b-c_d@example"), nil)
        #expect(UserRecord.problem(withName: "") != nil)
        #expect(UserRecord.problem(withName: "has space") != nil)
        #expect(UserRecord.problem(withName: "new\nline") != nil)
        #expect(UserRecord.problem(withName: String(repeating: "a", count: 65)) != nil)
    }

    @Test("grant merges into the rule with the same pattern; revoke takes permissions away and drops empty rules")
    func grantAndRevoke() throws {
        let users = UserDirectory()
        try users.add(UserRecord(name: "bob", passwordHash: "$argon2id$x", rules: try rules("sensor-*=read")))
        try users.grant(try rules("sensor-*=write", "order-1=read"), to: "bob")
        expectEqual(users.user(named: "bob")?.rules, (try rules("sensor-*=read,write", "order-1=read")))
        try users.revoke(try rules("sensor-*=read", "order-1=read", "other=admin"), from: "bob")
        expectEqual(users.user(named: "bob")?.rules, (try rules("sensor-*=write")))
        #expect(throws: UserDirectoryError.self) { try users.grant([], to: "nobody") }
        #expect(throws: UserDirectoryError.self) { try users.add(UserRecord(name: "bob", passwordHash: "$argon2id$y")) }
    }

    @Test("the users file form round-trips and refuses what it cannot use")
    func fileForm() throws {
        let users = UserDirectory()
        let hash = try PasswordHasher.hash("pw", cost: .minimal)
        try users.add(UserRecord(name: "zed", passwordHash: hash, rules: try rules("*=read,write,admin")))
        try users.add(UserRecord(name: "amy", passwordHash: hash))
        let text = users.fileText
        expectEqual(text.split(separator: "\n").count, 4, "one user per line: \(text)")
        let again = try UserDirectory(fileText: Array(text.utf8))
        expectEqual(again.users, users.users)
        expectEqual(again.users.map(\.name), ["amy", "zed"])
        for bad in [#"[]"#, #"{"users":[{"name":"a"}]}"#, #"{"users":[{"name":"a b","passwordHash":"$argon2id$x"}]}"#,
                    #"{"users":[{"name":"a","passwordHash":"$argon2id$x","rules":[{"objects":"*","allow":["fly"]}]}]}"#,
                    #"{"users":[{"name":"a","passwordHash":"$argon2id$x"},{"name":"a","passwordHash":"$argon2id$x"}]}"#] {
            #expect(throws: UserDirectoryError.self, "\(bad)") { _ = try UserDirectory(fileText: Array(bad.utf8)) }
        }
    }

    @Test("API tokens: random, parsed strictly, matched by hash only, revocable")
    func apiTokens() throws {
        let users = UserDirectory()
        try users.add(UserRecord(name: "svc", passwordHash: "$argon2id$x"))
        let first = try users.createToken(for: "svc")
        let second = try users.createToken(for: "svc")
        #expect(first.text != second.text && first.id != second.id)
        expectEqual(users.user(presentingToken: first.text)?.name, "svc")
        expectEqual(users.user(presentingToken: first.text.uppercased()), nil)
        expectEqual(users.user(presentingToken: String(first.text.dropLast()) + "x"), nil)
        expectEqual(users.user(presentingToken: ""), nil)
        #expect(!users.fileText.contains(String(first.text.suffix(64))), "only the hash is stored")
        let reread = try UserDirectory(fileText: Array(users.fileText.utf8))
        expectEqual(reread.user(presentingToken: second.text)?.name, "svc")
        try users.revokeToken(first.id, of: "svc")
        expectEqual(users.user(presentingToken: first.text), nil)
        expectEqual(users.user(presentingToken: second.text)?.name, "svc")
        try users.remove("svc")
        expectEqual(users.user(presentingToken: second.text), nil)
    }

    @Test("peer failure scores grow with failures and halve with time")
    func peerFailureScores() {
        var scores = PeerFailureScores(halfLife: 1000, maximumPeers: 4)
        expectEqual(scores.score(of: "10.0.0.1", now: 0), 0)
        for _ in 1...4 { scores.recordFailure(of: "10.0.0.1", now: 0) }
        expectEqual(scores.score(of: "10.0.0.1", now: 0), 4)
        expectEqual(scores.score(of: "10.0.0.1", now: 1000), 2)
        expectEqual(scores.score(of: "10.0.0.2", now: 1000), 0)
        // Past the limit, faded peers are forgotten first.
        for peer in ["a", "b", "c"] { scores.recordFailure(of: peer, now: 0) }
        scores.recordFailure(of: "d", now: 100_000)
        expectEqual(scores.score(of: "d", now: 100_000), 1)
        expectEqual(scores.score(of: "a", now: 100_000), 0)
    }

    @Test("an unknown name is checked against a dummy hash of the cost most users have")
    func unknownUserHashFollowsTheCommonCost() throws {
        let users = UserDirectory()
        // No users: the interactive cost's parameters.
        expectEqual(PasswordHasher.parameters(of: users.unknownUserHash), PasswordHasher.parameters(of: try PasswordHasher.hash("x", cost: .interactive)))
        let minimal = try PasswordHasher.hash("pw", cost: .minimal)
        try users.add(UserRecord(name: "a", passwordHash: minimal))
        try users.add(UserRecord(name: "b", passwordHash: try PasswordHasher.hash("pw", cost: .minimal)))
        try users.add(UserRecord(name: "c", passwordHash: try PasswordHasher.hash("pw", cost: .interactive)))
        let dummy = users.unknownUserHash
        expectEqual(PasswordHasher.parameters(of: dummy), PasswordHasher.parameters(of: minimal))
        #expect(PasswordHasher.isWellFormedHash(dummy))
        #expect(PasswordHasher.isReadable(dummy, withCostOf: .minimal))
        #expect(!PasswordHasher.isReadable(dummy, withCostOf: .interactive))
        expectEqual(users.unknownUserHash, dummy, "made once until a change")
        // libsodium reads it (a wrong password, not a malformed hash) and nothing matches it.
        #expect(!PasswordHasher.verify("pw", against: dummy))
        #expect(!PasswordHasher.verify("", against: dummy))
        // A change may change the most common cost: a tie goes to the costlier.
        try users.remove("b")
        expectEqual(PasswordHasher.parameters(of: users.unknownUserHash), PasswordHasher.parameters(of: users.user(named: "c")!.passwordHash))
        expectEqual(PasswordHasher.parameters(of: "$argon2id$v=19$m=8,t=1$salt$hash"), nil)
        expectEqual(PasswordHasher.parameters(of: "$argon2i$v=19$m=8,t=1,p=1$salt$hash"), nil)
    }
}
