import COpenSSL
import KVOModel
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One backup copy being streamed to its client (`Server+Backup`): the checked copy (`StoreCopyJob`) open for
/// reading, read in order one chunk per `backup` request, each chunk added to a SHA-256 of the whole file, which the
/// last chunk's reply carries. `end()` closes and removes the copy: nothing is left on the server once the transfer
/// ends, whichever way.
///
/// Owned by `BackupTransfers`; loop thread only. Each chunk is one `pread` of at most `BackupTransfers.chunkBytes`
/// and its base64 text: a fraction of a millisecond of the loop.
final class BackupTransfer {
    /// The partial copy, removed by `end()`.
    let partial: String
    /// What the copy holds (checked when it was made).
    let summary: StoreBackup.Summary
    /// The copy's size in bytes.
    let size: Int
    /// Where the next chunk begins: the bytes sent so far.
    private(set) var offset = 0
    private var descriptor: Int32
    private var digest: OpaquePointer?

    /// Opens the copy at `partial`; nil (and the copy removed) when it cannot be read.
    init?(partial: String, summary: StoreBackup.Summary) {
        self.partial = partial
        self.summary = summary
        descriptor = open(partial, O_RDONLY | O_CLOEXEC)
        var info = stat()
        guard descriptor >= 0, fstat(descriptor, &info) == 0, let context = EVP_MD_CTX_new() else {
            if descriptor >= 0 { close(descriptor) }
            unlink(partial)
            return nil
        }
        size = Int(info.st_size)
        digest = context
        EVP_DigestInit_ex(context, EVP_sha256(), nil)
    }

    deinit {
        end()
    }

    /// The next chunk (at most `maximum` bytes, from `offset`) as base64, and, after the last one, the SHA-256 of the
    /// whole copy as 64 hex digits. Throws `storage_unavailable` when the copy cannot be read.
    func nextChunk(maximum: Int) throws(KVOError) -> (base64: String, bytes: Int, sha256: String?) {
        guard descriptor >= 0, let digest else { throw KVOError(.storageUnavailable, "the backup copy was closed") }
        let length = min(maximum, size - offset)
        var buffer = [UInt8](repeating: 0, count: max(length, 0))
        var got = 0
        while got < length {
            let count = buffer.withUnsafeMutableBytes { raw in
                pread(descriptor, raw.baseAddress! + got, length - got, off_t(offset + got))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else {
                throw KVOError(.storageUnavailable, "the backup copy cannot be read at byte \(offset + got) of \(size)"
                               + (count < 0 ? ": \(String(cString: strerror(errno)))" : ": it is shorter than it was"))
            }
            got += count
        }
        buffer.withUnsafeBytes { _ = EVP_DigestUpdate(digest, $0.baseAddress, $0.count) }
        offset += length
        var text = [UInt8](repeating: 0, count: (length + 2) / 3 * 4 + 1)
        let encoded = length == 0 ? 0 : Int(EVP_EncodeBlock(&text, buffer, Int32(length)))
        let base64 = String(decoding: text.prefix(encoded), as: UTF8.self)
        guard offset >= size else { return (base64, length, nil) }
        var hash = [UInt8](repeating: 0, count: 32)
        var hashLength: UInt32 = 0
        EVP_DigestFinal_ex(digest, &hash, &hashLength)
        return (base64, length, HexText.encode(hash.prefix(Int(hashLength))))
    }

    /// Closes and removes the copy. Idempotent.
    func end() {
        if descriptor >= 0 {
            close(descriptor)
            descriptor = -1
            unlink(partial)
        }
        if let digest {
            EVP_MD_CTX_free(digest)
            self.digest = nil
        }
    }
}
