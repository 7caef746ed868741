import COpenSSL

/// Standard base64 (RFC 4648, with padding), decoded by OpenSSL (`EVP_DecodeBlock`): the `data` of `backup` chunks.
/// A value; any thread.
enum Base64 {
    /// The bytes `text` encodes; nil when it is not base64 (a length not a multiple of 4, another character).
    static func decode(_ text: String) -> [UInt8]? {
        var input = Array(text.utf8)
        guard input.count % 4 == 0 else { return nil }
        guard !input.isEmpty else { return [] }
        // EVP_DecodeBlock counts the padding as zero bytes: they are dropped below.
        let padding = input.last == 0x3D ? (input[input.count - 2] == 0x3D ? 2 : 1) : 0
        var output = [UInt8](repeating: 0, count: input.count / 4 * 3)
        let decoded = EVP_DecodeBlock(&output, &input, Int32(input.count))
        guard decoded == Int32(output.count) else { return nil }
        output.removeLast(padding)
        return output
    }
}
