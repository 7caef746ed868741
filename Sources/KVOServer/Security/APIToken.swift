import CSodium
import KVOJSON
import KVOEngine
import KVOModel

/// API tokens for services: `kvod_<id>_<secret>`, where `id` is 12 hex digits naming the token (for
/// listing and revoking; not secret) and `secret` 64 hex digits of 32 random bytes (`randombytes_buf`).
/// Only the BLAKE2b-256 hash of the secret is stored (`crypto_generichash`): the token is shown once, at
/// creation. Checking one hashes 32 bytes and compares 32 (`sodium_memcmp`, constant time): well
/// under a microsecond, so it runs on the loop thread.
///
/// A stored token is a value; the functions are stateless. Any thread.
package struct APIToken: Equatable, Sendable {
    /// 12 hex digits.
    package let id: String
    /// BLAKE2b-256 of the secret's 32 bytes.
    package let hash: [UInt8]

    package init(id: String, hash: [UInt8]) {
        self.id = id
        self.hash = hash
    }

    static let secretBytes = 32
    static let idBytes = 6
    static let prefix = "kvod_"

    /// A new token: the text to show once, and what to store.
    package static func generate() -> (text: String, token: APIToken) {
        PasswordHasher.ensureInitialised()
        var idBytes = [UInt8](repeating: 0, count: APIToken.idBytes)
        randombytes_buf(&idBytes, idBytes.count)
        var secret = [UInt8](repeating: 0, count: APIToken.secretBytes)
        randombytes_buf(&secret, secret.count)
        defer { secret.withUnsafeMutableBytes { sodium_memzero($0.baseAddress, $0.count) } }
        let id = hex(idBytes)
        return (prefix + id + "_" + hex(secret), APIToken(id: id, hash: digest(secret)))
    }

    /// The id and secret of a token's text, or nil when it is not one.
    package static func parse(_ text: String) -> (id: String, secret: [UInt8])? {
        let utf8 = Array(text.utf8)
        let idLength = idBytes * 2, secretLength = secretBytes * 2
        guard utf8.count == prefix.utf8.count + idLength + 1 + secretLength, text.hasPrefix(prefix) else { return nil }
        let idStart = prefix.utf8.count
        guard utf8[idStart + idLength] == UInt8(ascii: "_"),
              let idBytes = unhex(utf8[idStart..<(idStart + idLength)]),
              let secret = unhex(utf8[(idStart + idLength + 1)...])
        else { return nil }
        return (hex(idBytes), secret)
    }

    /// Whether `secret` is this token's (constant time in the hash).
    package func matches(secret: [UInt8]) -> Bool {
        let presented = APIToken.digest(secret)
        guard presented.count == hash.count else { return false }
        return presented.withUnsafeBytes { a in hash.withUnsafeBytes { b in sodium_memcmp(a.baseAddress, b.baseAddress, a.count) == 0 } }
    }

    static func digest(_ secret: [UInt8]) -> [UInt8] {
        var output = [UInt8](repeating: 0, count: 32)
        crypto_generichash(&output, output.count, secret, UInt64(secret.count), nil, 0)
        return output
    }

    /// The stored form: `{"id":"…","hash":"<64 hex digits>"}`.
    package var json: JSONValue { .object(["id": .string(id), "hash": .string(APIToken.hex(hash))]) }

    package init(json: JSONValue) throws(UserDirectoryError) {
        guard case let .object(fields) = json, case let .string(id)? = fields["id"], case let .string(hashText)? = fields["hash"],
              id.utf8.count == APIToken.idBytes * 2, APIToken.unhex(Array(id.utf8)[...]) != nil,
              let hash = APIToken.unhex(Array(hashText.utf8)[...]), hash.count == 32
        else { throw UserDirectoryError("a token is {\"id\":<12 hex digits>,\"hash\":<64 hex digits>}") }
        self.init(id: id, hash: hash)
    }

    static func hex(_ bytes: [UInt8]) -> String { HexText.encode(bytes) }

    static func unhex(_ text: ArraySlice<UInt8>) -> [UInt8]? { HexText.decode(text) }
}
