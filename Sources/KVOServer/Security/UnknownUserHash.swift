import CSodium
import KVOEngine
import KVOModel

extension PasswordHasher {
    /// The cost parameters of an Argon2id hash string (`m=65536,t=2,p=1` of
    /// `$argon2id$v=19$m=65536,t=2,p=1$salt$hash`), or nil when it is not of that form.
    static func parameters(of hash: String) -> String? {
        let parts = hash.split(separator: "$", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0].isEmpty, parts[1] == "argon2id", parts[2] == "v=19" else { return nil }
        let fields = parts[3].split(separator: ",", omittingEmptySubsequences: false)
        guard fields.count == 3 else { return nil }
        for (field, name) in zip(fields, ["m=", "t=", "p="]) {
            guard field.hasPrefix(name), let value = UInt32(field.dropFirst(2)), value > 0 else { return nil }
        }
        return String(parts[3])
    }

    /// Memory times passes of `parameters` (`m=…,t=…,p=…`): a rough cost, to break ties.
    static func roughCost(of parameters: String) -> UInt64 {
        let numbers = parameters.split(separator: ",").compactMap { UInt64($0.dropFirst(2)) }
        return numbers.count == 3 ? numbers[0] * numbers[1] : 0
    }

    /// A hash with these cost parameters that no password matches in practice: a random salt and a
    /// random 32-byte digest, made without hashing anything (cheap: any thread, the loop's included).
    /// Checking a password against it costs what checking one against a real hash of these parameters
    /// costs: libsodium recomputes the digest with the salt and parameters, then compares.
    static func dummyHash(parameters: String) -> String {
        ensureInitialised()
        return "$argon2id$v=19$\(parameters)$\(randomBase64(count: 16))$\(randomBase64(count: 32))"
    }

    /// Whether libsodium reads `hash` as an Argon2id hash string of exactly `cost`'s limits (a test of
    /// `dummyHash`'s form).
    static func isReadable(_ hash: String, withCostOf cost: Cost) -> Bool {
        ensureInitialised()
        let limits = cost.limits
        return crypto_pwhash_str_needs_rehash(hash, limits.operations, limits.memory) == 0
    }

    /// `count` random bytes in base64 without padding (the form of a hash string's salt and digest).
    private static func randomBase64(count: Int) -> String {
        var bytes = [UInt8](repeating: 0, count: count)
        randombytes_buf(&bytes, count)
        let variant = Int32(sodium_base64_VARIANT_ORIGINAL_NO_PADDING)
        var text = [CChar](repeating: 0, count: sodium_base64_encoded_len(count, variant))
        _ = sodium_bin2base64(&text, text.count, bytes, count, variant)
        return text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }
}

extension UserDirectory {
    /// The hash an `auth` naming no user is checked against: a dummy of the cost parameters most of
    /// the users' hashes have (ties: the costlier; no users: the interactive cost), so that an unknown
    /// name costs the time a wrong password for a typical user costs (docs/design.md, "Password
    /// checks"). Made when first asked for after a change (cheap: `PasswordHasher.dummyHash`). Loop
    /// thread, like the directory.
    package var unknownUserHash: String {
        if let unknownUserHashCache { return unknownUserHashCache }
        let made = PasswordHasher.dummyHash(parameters: mostCommonHashParameters)
        unknownUserHashCache = made
        return made
    }

    /// The cost parameters (`m=…,t=…,p=…`) most users' hashes have; the interactive cost's when there
    /// are no users (or none of their hashes can be read).
    var mostCommonHashParameters: String {
        var counts: [String: Int] = [:]
        for user in records.values {
            if let parameters = PasswordHasher.parameters(of: user.passwordHash) { counts[parameters, default: 0] += 1 }
        }
        let best = counts.max { left, right in
            (left.value, PasswordHasher.roughCost(of: left.key), left.key) < (right.value, PasswordHasher.roughCost(of: right.key), right.key)
        }
        return best?.key ?? PasswordHasher.interactiveParameters
    }
}

extension PasswordHasher {
    /// The interactive cost's parameters, as a hash string writes them.
    static var interactiveParameters: String {
        let limits = Cost.interactive.limits
        return "m=\(limits.memory / 1024),t=\(limits.operations),p=1"
    }
}
