import COpenSSL
import KVOEngine
import KVOModel

/// SHA-256 of a byte string as 64 lowercase hex digits (OpenSSL's EVP). Any thread.
enum SHA256Hex {
    static func of(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        guard let context = EVP_MD_CTX_new() else { return "" }
        defer { EVP_MD_CTX_free(context) }
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
        bytes.withUnsafeBytes { _ = EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
        EVP_DigestFinal_ex(context, &digest, &length)
        return HexText.encode(digest.prefix(Int(length)))
    }
}
