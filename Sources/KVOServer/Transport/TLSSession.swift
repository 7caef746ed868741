import COpenSSL
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// One connection's TLS: ciphertext from the socket in, plaintext out to the connection's line framer,
/// and the reverse for output. Owned by its `Connection`; loop thread only; no thread, no blocking call.
///
/// OpenSSL reads and writes through one BIO of our own (`TLSSession.bioMethod`), an in-memory BIO with no
/// buffer of its own: its read callback hands OpenSSL the bytes of the read being processed (`input`, valid
/// only during `receive`), its write callback appends what OpenSSL produces straight to `ciphertext`, a
/// chunked output buffer from the loop's pool, which the connection writes to the socket. So:
/// - output produced by *any* SSL call (a handshake flight, a session ticket or a TLS 1.3 KeyUpdate answer
///   made inside `SSL_read`, an alert) lands in `ciphertext` as it is made, with nothing to forget to drain;
///   the connection schedules a write whenever `ciphertext` is not empty after a call here;
/// - nothing is copied into or out of a BIO buffer, and an idle connection holds no BIO memory.
///
/// Every SSL call is preceded by `ERR_clear_error()`, so `SSL_get_error` never reports an earlier failure.
final class TLSSession {
    /// What a call did, beyond delivering plaintext.
    enum Outcome {
        /// Carry on (the call may also have been waiting for more input).
        case proceed
        /// The peer sent close_notify.
        case peerClosed
        /// The handshake or the connection failed: the text says why. OpenSSL may have queued an alert
        /// in `ciphertext`; send it if you can, then close.
        case failed(String)
    }

    /// The context this session started from (kept alive by the session, whatever reloads happen).
    let context: TLSContext
    private let ssl: OpaquePointer
    private let pool: OutputChunkPool
    /// Ciphertext OpenSSL produced and the connection has not yet handed to the socket.
    @exclusivity(unchecked) var ciphertext = ChunkedOutputBuffer()
    /// The received bytes OpenSSL has not read yet; only set during `receive`.
    @exclusivity(unchecked) private var input = UnsafeRawBufferPointer(start: nil, count: 0)
    private(set) var isHandshakeComplete = false
    private(set) var hasFailed = false
    /// The length of an `SSL_write` that wanted a read: it must be retried with the same length.
    private var retryWriteLength = 0
    /// The first bytes the client sent, up to 7 (0x16 starts a TLS handshake record; an alert record's
    /// header and body are 7 bytes), for the failure text.
    private var firstBytes: [UInt8] = []
    /// The subject common name of the client's certificate, once the handshake verified it.
    private(set) var verifiedPeerCommonName: String?

    /// A server-side session from `context`, its output chunks from `pool`.
    init?(context: TLSContext, pool: OutputChunkPool) {
        guard let ssl = SSL_new(context.raw), let bio = BIO_new(TLSSession.bioMethod) else { return nil }
        self.context = context
        self.ssl = ssl
        self.pool = pool
        BIO_set_data(bio, Unmanaged.passUnretained(self).toOpaque())
        // One BIO both ways: SSL_set_bio takes the one reference.
        SSL_set_bio(ssl, bio, bio)
        SSL_set_accept_state(ssl)
    }

    deinit {
        SSL_free(ssl)
        ciphertext.release(returningTo: pool)
    }

    // MARK: - Input

    /// Feeds ciphertext from the socket: continues the handshake, then decrypts every complete record,
    /// handing the plaintext to `deliver` (valid during the call; return false to stop: the rest of
    /// `bytes` is then dropped). `scratch` receives the plaintext (the loop's; one record fits).
    func receive(_ bytes: UnsafeBufferPointer<UInt8>, scratch: UnsafeMutableRawBufferPointer,
                 deliver: (UnsafeBufferPointer<UInt8>) -> Bool) -> Outcome {
        guard !hasFailed else { return .failed("earlier TLS failure") }
        if firstBytes.count < 7, !isHandshakeComplete { firstBytes += bytes.prefix(7 - firstBytes.count) }
        input = UnsafeRawBufferPointer(bytes)
        defer { input = UnsafeRawBufferPointer(start: nil, count: 0) }
        if !isHandshakeComplete {
            ERR_clear_error()
            let status = SSL_do_handshake(ssl)
            guard status == 1 else { return outcome(ofFailedCall: status) }
            isHandshakeComplete = true
            verifiedPeerCommonName = readVerifiedPeerCommonName()
        }
        let plaintext = scratch.baseAddress!.assumingMemoryBound(to: UInt8.self)
        let capacity = Int32(clamping: scratch.count)
        while true {
            ERR_clear_error()
            let count = SSL_read(ssl, plaintext, capacity)
            guard count > 0 else { return outcome(ofFailedCall: count) }
            if !deliver(UnsafeBufferPointer(start: plaintext, count: Int(count))) { return .proceed }
        }
    }

    // MARK: - Output

    /// Encrypts `plaintext` into `ciphertext`, consuming what was encrypted: records of up to `staging.count`
    /// bytes (16 KiB, a full record), the chunks of a flush packed together into `staging` (the loop's) so that
    /// a flush of many small chunks costs one `SSL_write` per record, not one per chunk. An `SSL_write` that
    /// wants a read first (the handshake is not finished) leaves the rest in `plaintext`, to be retried with
    /// the same bytes and length after the next `receive`.
    func encrypt(_ plaintext: inout ChunkedOutputBuffer, staging: UnsafeMutableRawBufferPointer) -> Outcome {
        guard !hasFailed else { return .failed("earlier TLS failure") }
        while !plaintext.isEmpty {
            let length = retryWriteLength > 0 ? retryWriteLength : min(plaintext.count, staging.count)
            // Only the front chunks that cover one record, not the whole queue: a slow consumer's
            // megabytes would otherwise be described again for every 16 KiB record.
            var capacity = min(plaintext.chunkCount, 8)
            var buffers = pool.gatherBuffers(capacity: capacity)
            var count = plaintext.gather(into: buffers, capacity: capacity)
            while capacity < plaintext.chunkCount, (0..<count).reduce(0, { $0 + buffers[$1].len }) < length {
                capacity = min(plaintext.chunkCount, capacity * 2)
                buffers = pool.gatherBuffers(capacity: capacity)
                count = plaintext.gather(into: buffers, capacity: capacity)
            }
            let source: UnsafeRawPointer
            if count > 0, buffers[0].len >= length {
                source = UnsafeRawPointer(buffers[0].base!)  // the front chunk holds the whole record
            } else {
                var packed = 0
                for index in 0..<count where packed < length {
                    let piece = min(buffers[index].len, length - packed)
                    memcpy(staging.baseAddress! + packed, buffers[index].base!, piece)
                    packed += piece
                }
                source = UnsafeRawPointer(staging.baseAddress!)
            }
            ERR_clear_error()
            let status = SSL_write(ssl, source, Int32(length))
            guard status > 0 else {
                let outcome = outcome(ofFailedCall: status)
                if case .proceed = outcome { retryWriteLength = length }
                return outcome
            }
            retryWriteLength = 0
            plaintext.consume(Int(status), returningTo: pool)
        }
        return .proceed
    }

    /// Queues a close_notify alert in `ciphertext` (not after a failure, nor before the handshake ended);
    /// the peer's own close_notify is not waited for.
    func queueCloseNotify() {
        guard isHandshakeComplete, !hasFailed else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    // MARK: - Failures

    /// What a call that returned `status` <= 0 means: waiting for input (`.proceed`), the peer's
    /// close_notify, or a failure (which marks the session failed).
    private func outcome(ofFailedCall status: Int32) -> Outcome {
        switch SSL_get_error(ssl, status) {
        case SSL_ERROR_WANT_READ: return .proceed
        case SSL_ERROR_ZERO_RETURN: return .peerClosed
        default:
            hasFailed = true
            return .failed(failureDescription())
        }
    }

    private func failureDescription() -> String {
        let reasons = TLSSetupError.takeOpenSSLErrors()
        guard !isHandshakeComplete else { return "TLS error: \(reasons.isEmpty ? "unknown" : reasons)" }
        if let firstByte = firstBytes.first, firstByte != TLSSession.handshakeRecordType {
            if let record = TLSRecordHeader.describe(firstBytes) {
                return "TLS handshake failed: \(record): \(reasons.isEmpty ? "unknown" : reasons)"
            }
            return "TLS handshake failed: the client did not start with a TLS handshake (first byte 0x"
                + String(firstByte, radix: 16) + (firstByte == UInt8(ascii: "{") ? ", '{'" : "") + "; "
                + "a plaintext client on the TLS port?): \(reasons.isEmpty ? "unknown" : reasons)"
        }
        let verification = SSL_get_verify_result(ssl)
        if verification != Int(X509_V_OK) {
            return "TLS handshake failed: client certificate not accepted: "
                + String(cString: X509_verify_cert_error_string(verification))
        }
        return "TLS handshake failed: \(reasons.isEmpty ? "unknown" : reasons)"
    }

    /// The record type that starts every TLS handshake (a ClientHello's first byte).
    static let handshakeRecordType: UInt8 = 0x16

    // MARK: - Client certificate

    /// The subject CN of the client's certificate when one was presented and verified; nil when there is
    /// none, it did not verify, or its subject has no CN, several, or one with a NUL byte.
    private func readVerifiedPeerCommonName() -> String? {
        guard let certificate = SSL_get0_peer_certificate(ssl), SSL_get_verify_result(ssl) == Int(X509_V_OK),
              let subject = X509_get_subject_name(certificate)
        else { return nil }
        let index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1)
        guard index >= 0, X509_NAME_get_index_by_NID(subject, NID_commonName, index) < 0,
              let entry = X509_NAME_get_entry(subject, index), let data = X509_NAME_ENTRY_get_data(entry)
        else { return nil }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else { return nil }
        defer { kvod_OPENSSL_free(utf8) }
        let bytes = UnsafeBufferPointer(start: utf8, count: Int(length))
        guard !bytes.contains(0) else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    // MARK: - The BIO

    /// The BIO method every session's BIO uses: reads from `input`, writes into `ciphertext` (the session
    /// is the BIO's data, unretained: the BIO lives inside the session's `SSL`).
    nonisolated(unsafe) private static let bioMethod: OpaquePointer = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "kvod connection") else {
            fatalError("cannot create the TLS BIO method")
        }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            kvod_BIO_clear_retry_flags(bio)
            let session = Unmanaged<TLSSession>.fromOpaque(BIO_get_data(bio)).takeUnretainedValue()
            session.ciphertext.append(UnsafeRawBufferPointer(start: data, count: Int(length)), pool: session.pool)
            return length
        }
        _ = BIO_meth_set_read(method) { bio, buffer, length in
            guard let bio, let buffer, length > 0 else { return 0 }
            kvod_BIO_clear_retry_flags(bio)
            let session = Unmanaged<TLSSession>.fromOpaque(BIO_get_data(bio)).takeUnretainedValue()
            let available = session.input.count
            guard available > 0, let source = session.input.baseAddress else {
                kvod_BIO_set_retry_read(bio)
                return -1
            }
            let count = min(Int(length), available)
            memcpy(buffer, source, count)
            session.input = UnsafeRawBufferPointer(start: source + count, count: available - count)
            return Int32(count)
        }
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in
            // Flush: nothing is held here. Everything else (pending counts, kTLS, ...): not supported.
            command == BIO_CTRL_FLUSH ? 1 : 0
        }
        _ = BIO_meth_set_create(method) { bio in
            BIO_set_init(bio, 1)
            return 1
        }
        return method
    }()
}
