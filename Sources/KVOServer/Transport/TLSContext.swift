import COpenSSL
import KVOEngine
import KVOModel

/// The TLS listener's OpenSSL context (`SSL_CTX`): the certificate, key, CA and protocol settings every
/// TLS connection accepted while it is current starts from.
///
/// Made when the server starts and again on each reload (SIGHUP); never changed once made. The server
/// holds the current one; each `TLSSession` holds the one it started with, so a reload changes nothing
/// for connections already open, and an old context goes away with its last connection.
///
/// Settings: TLS 1.2 and 1.3 only; renegotiation off (`SSL_OP_NO_RENEGOTIATION`: a client's renegotiation
/// request gets a `no_renegotiation` warning and the connection goes on); `SSL_MODE_RELEASE_BUFFERS`, so an
/// idle connection holds no record buffers; no server-side session cache (resumption uses tickets, which
/// the server does not store). Made on the loop thread; used there only.
final class TLSContext {
    /// The `SSL_CTX`, freed with this object.
    let raw: OpaquePointer

    /// Reads the certificate chain, key and CA named in `configuration`.
    init(_ configuration: TLSConfiguration) throws(TLSSetupError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw .failed("creating an OpenSSL context") }
        raw = context
        // From here on a throw runs deinit, which frees the context.
        guard kvod_SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION) == 1 else {
            throw .failed("requiring TLS 1.2 or later")
        }
        SSL_CTX_set_options(raw, kvod_SSL_OP_NO_RENEGOTIATION() | kvod_SSL_OP_NO_COMPRESSION())
        _ = kvod_SSL_CTX_set_mode(raw, kvod_SSL_MODE_RELEASE_BUFFERS() | kvod_SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER())
        _ = kvod_SSL_CTX_set_session_cache_mode(raw, kvod_SSL_SESS_CACHE_OFF())
        // Without a session id context, resuming a session whose client certificate was verified fails.
        _ = SSL_CTX_set_session_id_context(raw, TLSContext.sessionIDContext, UInt32(TLSContext.sessionIDContext.count))
        let certificate = configuration.certificatePath
        guard SSL_CTX_use_certificate_chain_file(raw, certificate) == 1 else {
            throw .failed("loading the certificate from '\(certificate)' (--tls-cert)")
        }
        let key = configuration.privateKeyPath
        guard SSL_CTX_use_PrivateKey_file(raw, key, SSL_FILETYPE_PEM) == 1 else {
            throw .failed("loading the private key from '\(key)' (--tls-key)")
        }
        guard SSL_CTX_check_private_key(raw) == 1 else {
            throw .failed("the private key in '\(key)' does not match the certificate in '\(certificate)'")
        }
        if let authority = configuration.certificateAuthorityPath {
            guard SSL_CTX_load_verify_locations(raw, authority, nil) == 1 else {
                throw .failed("loading the certificate authorities from '\(authority)' (--tls-ca)")
            }
            // Tells clients which authorities their certificate should come from.
            if let names = SSL_load_client_CA_file(authority) { SSL_CTX_set_client_CA_list(raw, names) }
        }
        let mode: Int32
        switch configuration.clientAuthentication {
        case .none: mode = SSL_VERIFY_NONE
        case .optional: mode = SSL_VERIFY_PEER
        case .require: mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT
        }
        SSL_CTX_set_verify(raw, mode, nil)
        ERR_clear_error()
    }

    deinit {
        SSL_CTX_free(raw)
    }

    private static let sessionIDContext: [UInt8] = Array("kvod".utf8)
}
