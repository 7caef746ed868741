import COpenSSL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The client side of a TLS connection over a blocking socket. OpenSSL reads and writes the descriptor
/// through a small BIO of ours (`socketMethod`) rather than `SSL_set_fd`, whose `write` would raise SIGPIPE
/// in the calling process when the server has gone: ours sends with `Socket.sendFlags` (MSG_NOSIGNAL on
/// Linux; on Darwin the socket has SO_NOSIGPIPE), as the plaintext connection does. The one client TLS
/// implementation of the repository: made by `KVOClient`'s connection (and by KVOWireProbe's
/// `KVOConnection`), which owns it and the descriptor; one thread at a time.
package final class TLSClientSession {
    private let context: OpaquePointer
    private let ssl: OpaquePointer

    /// Handshakes over the connected `descriptor`: TLS 1.2 or 1.3, the server's certificate verified against
    /// the options' CA (or the system's) and `serverName` (or `host`).
    package init(descriptor: Int32, host: String, options: TLSClientOptions) throws(TLSSessionError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .tls("cannot create an OpenSSL context") }
        self.context = context
        // Configured before SSL_new, which copies the context's verify mode and certificate.
        if let problem = TLSClientSession.configure(context, options: options) {
            SSL_CTX_free(context)
            throw .tls(problem)
        }
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw .tls("cannot create an OpenSSL session")
        }
        self.ssl = ssl
        // From here a throw runs deinit, which frees both.
        let name = options.serverName ?? host
        let isAddress = name.contains(":") || name.allSatisfy { $0.isNumber || $0 == "." }
        if isAddress {
            _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name)
        } else {
            _ = kvod_SSL_set_tlsext_host_name(ssl, name)
            _ = SSL_set1_host(ssl, name)
        }
        guard let bio = BIO_new(TLSClientSession.socketMethod) else { throw .tls("cannot create a socket BIO") }
        BIO_set_data(bio, UnsafeMutableRawPointer(bitPattern: Int(descriptor) + 1))
        SSL_set_bio(ssl, bio, bio)
        ERR_clear_error()
        let status = SSL_connect(ssl)
        guard status == 1 else {
            let verification = SSL_get_verify_result(ssl)
            if verification != Int(X509_V_OK) {
                throw .tls("the server's certificate was not accepted: \(String(cString: X509_verify_cert_error_string(verification)))")
            }
            let reasons = TLSClientSession.takeErrors()
            // No reason: the server closed the connection (it may be restarting), as for a plaintext connection.
            if reasons.isEmpty { throw .closed }
            throw .tls("TLS handshake failed: \(reasons)")
        }
    }

    /// Protocol versions, trusted authorities and our certificate; a description of what failed, or nil.
    private static func configure(_ context: OpaquePointer, options: TLSClientOptions) -> String? {
        _ = kvod_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION)
        _ = kvod_SSL_CTX_set_mode(context, kvod_SSL_MODE_AUTO_RETRY())
        if let authority = options.certificateAuthorityPath {
            guard SSL_CTX_load_verify_locations(context, authority, nil) == 1 else {
                return "cannot load the certificate authorities from '\(authority)': \(takeErrors())"
            }
        } else {
            SSL_CTX_set_default_verify_paths(context)
        }
        if let certificate = options.certificatePath {
            let key = options.privateKeyPath ?? certificate
            guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
                return "cannot load the client certificate from '\(certificate)': \(takeErrors())"
            }
            guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1, SSL_CTX_check_private_key(context) == 1 else {
                return "cannot load the client key from '\(key)': \(takeErrors())"
            }
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
        return nil
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
    }

    /// Decrypted bytes already received and not yet read: `read` returns them without touching the socket.
    package var bufferedByteCount: Int { Int(SSL_pending(ssl)) }

    /// Sends all of `bytes`.
    package func write(_ bytes: UnsafeRawBufferPointer) throws(TLSSessionError) {
        var sent = 0
        while sent < bytes.count {
            ERR_clear_error()
            let status = SSL_write(ssl, bytes.baseAddress! + sent, Int32(clamping: bytes.count - sent))
            guard status > 0 else { throw failure(status) }
            sent += Int(status)
        }
    }

    /// Reads up to `buffer.count` bytes (blocking); 0 when the server closed the connection.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSSessionError) -> Int {
        ERR_clear_error()
        let status = SSL_read(ssl, buffer.baseAddress, Int32(clamping: buffer.count))
        if status > 0 { return Int(status) }
        let error = SSL_get_error(ssl, status)
        if error == SSL_ERROR_ZERO_RETURN || (error == SSL_ERROR_SYSCALL && ERR_peek_error() == 0) { return 0 }
        throw failure(status)
    }

    /// Sends close_notify (without waiting for the server's).
    package func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    private func failure(_ status: Int32) -> TLSSessionError {
        let error = SSL_get_error(ssl, status)
        if error == SSL_ERROR_ZERO_RETURN { return .closed }
        if error == SSL_ERROR_SYSCALL {
            if errno == EPIPE || errno == ECONNRESET || ERR_peek_error() == 0 { return .closed }
            return .io(String(cString: strerror(errno)))
        }
        let reasons = TLSClientSession.takeErrors()
        return .tls(reasons.isEmpty ? "TLS error \(error)" : reasons)
    }

    /// The BIO method reading and writing the socket whose descriptor + 1 is the BIO's data.
    nonisolated(unsafe) private static let socketMethod: OpaquePointer = {
        guard let method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR, "kvod client socket") else {
            fatalError("cannot create the TLS client BIO method")
        }
        _ = BIO_meth_set_write(method) { bio, data, length in
            guard let bio, let data, length > 0 else { return 0 }
            kvod_BIO_clear_retry_flags(bio)
            let descriptor = Int32(Int(bitPattern: BIO_get_data(bio)) - 1)
            let sent = send(descriptor, data, Int(length), Socket.sendFlags)
            if sent < 0, errno == EINTR || errno == EAGAIN { kvod_BIO_set_retry_write(bio) }
            return Int32(sent)
        }
        _ = BIO_meth_set_read(method) { bio, buffer, length in
            guard let bio, let buffer, length > 0 else { return 0 }
            kvod_BIO_clear_retry_flags(bio)
            let descriptor = Int32(Int(bitPattern: BIO_get_data(bio)) - 1)
            let received = recv(descriptor, buffer, Int(length), 0)
            if received < 0, errno == EINTR || errno == EAGAIN { kvod_BIO_set_retry_read(bio) }
            return Int32(received)
        }
        _ = BIO_meth_set_ctrl(method) { _, command, _, _ in command == BIO_CTRL_FLUSH ? 1 : 0 }
        _ = BIO_meth_set_create(method) { bio in
            BIO_set_init(bio, 1)
            return 1
        }
        return method
    }()

    /// This thread's OpenSSL error reasons, oldest first, and clears them.
    package static func takeErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            guard code != 0 else { break }
            if let reason = ERR_reason_error_string(code) { reasons.append(String(cString: reason)) }
        }
        return reasons.joined(separator: "; ")
    }
}

/// What a `TLSClientSession` call failed with; each owner maps it to its own error type.
package enum TLSSessionError: Error, Equatable {
    /// The server closed the connection (or reset it).
    case closed
    /// A socket call failed.
    case io(String)
    /// TLS itself failed: a certificate not accepted, a handshake refused, a bad record.
    case tls(String)
}
