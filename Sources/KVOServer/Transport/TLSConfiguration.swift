import KVOEngine
import KVOModel

/// The TLS listener's settings (`--tls-port`, `--tls-cert`, `--tls-key`, `--tls-ca`, `--tls-client-auth`,
/// `--tls-handshake-timeout`). The files are read when the server starts and again on SIGHUP
/// (`Server.reloadTLS()`). A value; any thread.
public struct TLSConfiguration: Sendable {
    /// Whether the TLS listener asks for client certificates.
    public enum ClientAuthentication: String, Sendable, CaseIterable {
        /// No client certificate is asked for.
        case none
        /// A client may present a certificate; one that does not verify against the CA fails the handshake.
        case optional
        /// Every client must present a certificate that verifies against the CA.
        case require
    }

    /// Port of the TLS listener (on `ServerConfiguration.host`); 0 picks a free one.
    public var port: Int
    /// PEM file with the server certificate, optionally followed by its intermediate certificates.
    public var certificatePath: String
    /// PEM file with the certificate's private key (unencrypted).
    public var privateKeyPath: String
    /// PEM file with the certificate authorities client certificates are verified against.
    public var certificateAuthorityPath: String?
    public var clientAuthentication: ClientAuthentication
    /// Seconds a TLS client may take to finish its handshake before it is closed.
    public var handshakeTimeout: Double

    /// The default `handshakeTimeout`, in seconds.
    public static let defaultHandshakeTimeout: Double = 10

    public init(port: Int, certificatePath: String, privateKeyPath: String, certificateAuthorityPath: String? = nil,
                clientAuthentication: ClientAuthentication = .none,
                handshakeTimeout: Double = TLSConfiguration.defaultHandshakeTimeout) {
        self.port = port
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.certificateAuthorityPath = certificateAuthorityPath
        self.clientAuthentication = clientAuthentication
        self.handshakeTimeout = handshakeTimeout
    }
}
