import CSodium
import KVOEngine
import KVOModel

/// Argon2id password hashes through libsodium (`crypto_pwhash_str`): a random salt and the cost
/// limits are stored in the hash string itself (`$argon2id$v=19$m=65536,t=2,p=1$…`), so hashes made
/// with different costs verify alike.
///
/// Stateless. `hash` and `verify` cost tens to hundreds of milliseconds and 64 MiB at the
/// interactive cost, by design: the server calls `verify` only on the libuv thread pool
/// (`PasswordVerificationQueue`), never on the loop thread; the `kvod user` commands call both
/// directly. Any thread.
package enum PasswordHasher {
    /// How much work (and memory) one hash costs. Stored in each hash: a later change of the default
    /// leaves existing hashes valid.
    package enum Cost: String, CaseIterable, Sendable {
        /// libsodium's INTERACTIVE limits (2 passes, 64 MiB; about 150 ms here). The default.
        case interactive
        /// libsodium's MODERATE limits (3 passes, 256 MiB; about a second).
        case moderate
        /// The smallest limits libsodium accepts (1 pass, 8 KiB): for tests only, as it gives no
        /// protection against offline guessing.
        case minimal

        var limits: (operations: UInt64, memory: Int) {
            switch self {
            case .interactive: return (UInt64(crypto_pwhash_opslimit_interactive()), crypto_pwhash_memlimit_interactive())
            case .moderate: return (UInt64(crypto_pwhash_opslimit_moderate()), crypto_pwhash_memlimit_moderate())
            case .minimal: return (UInt64(crypto_pwhash_opslimit_min()), crypto_pwhash_memlimit_min())
            }
        }
    }

    /// Longest password accepted, in bytes (longer ones are refused before any hashing).
    package static let maximumPasswordLength = 1024

    /// Why a hash could not be made.
    package enum HashError: Error, Equatable, CustomStringConvertible {
        case emptyPassword
        case passwordTooLong(limit: Int)
        /// libsodium failed (out of memory for the cost's memory limit).
        case outOfMemory

        package var description: String {
            switch self {
            case .emptyPassword: return "the password is empty"
            case let .passwordTooLong(limit): return "the password is longer than \(limit) bytes"
            case .outOfMemory: return "hashing the password failed (out of memory)"
            }
        }
    }

    /// libsodium initialised once (thread-safe: a global's initialiser runs once).
    private static let initialised: Bool = sodium_init() >= 0

    /// Makes libsodium ready; cheap after the first call. Any thread.
    @discardableResult
    package static func ensureInitialised() -> Bool { initialised }

    /// A new Argon2id hash of `password` with a fresh random salt. Slow by design (see `Cost`).
    package static func hash(_ password: String, cost: Cost = .interactive) throws(HashError) -> String {
        let bytes = Array(password.utf8)
        guard !bytes.isEmpty else { throw .emptyPassword }
        guard bytes.count <= maximumPasswordLength else { throw .passwordTooLong(limit: maximumPasswordLength) }
        ensureInitialised()
        var output = [CChar](repeating: 0, count: Int(crypto_pwhash_strbytes()))
        let limits = cost.limits
        let status = bytes.withUnsafeBufferPointer { password in
            password.withMemoryRebound(to: CChar.self) {
                crypto_pwhash_str(&output, $0.baseAddress!, UInt64($0.count), limits.operations, limits.memory)
            }
        }
        guard status == 0 else { throw .outOfMemory }
        return output.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
    }

    /// Whether `password` matches `hash` (constant time in the password: libsodium recomputes the
    /// hash and compares). Slow by design: never on the loop thread.
    package static func verify(_ password: UnsafeBufferPointer<UInt8>, against hash: UnsafePointer<CChar>) -> Bool {
        ensureInitialised()
        guard let start = password.baseAddress else {
            // An empty password: libsodium wants a pointer all the same.
            var nothing: CChar = 0
            return crypto_pwhash_str_verify(hash, &nothing, 0) == 0
        }
        return start.withMemoryRebound(to: CChar.self, capacity: password.count) {
            crypto_pwhash_str_verify(hash, $0, UInt64(password.count)) == 0
        }
    }

    /// Whether `password` matches `hash`. Slow by design: never on the loop thread.
    package static func verify(_ password: String, against hash: String) -> Bool {
        let bytes = Array(password.utf8)
        return bytes.withUnsafeBufferPointer { password in hash.withCString { verify(password, against: $0) } }
    }

    /// Whether `text` looks like a hash this type made (an Argon2id string), for checking a users file.
    package static func isWellFormedHash(_ text: String) -> Bool {
        text.hasPrefix("$argon2id$") && text.utf8.count < Int(crypto_pwhash_strbytes())
    }

    /// A hash of the interactive cost no password matches in practice: the fallback a
    /// `PasswordVerification` given no hash checks (the server gives it `UserDirectory.unknownUserHash`,
    /// of the users' most common cost, for an unknown name). Made once, on first use (the thread
    /// pool's), from a random password.
    static let dummyHash: String = {
        ensureInitialised()
        var secret = [UInt8](repeating: 0, count: 32)
        randombytes_buf(&secret, secret.count)
        let text = secret.map { String($0, radix: 16) }.joined()
        return (try? hash(text, cost: .interactive)) ?? "$argon2id$v=19$m=65536,t=2,p=1$invalid"
    }()
}
