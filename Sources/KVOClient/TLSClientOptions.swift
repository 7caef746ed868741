/// How a `KVOClient` (and KVOWireProbe's `KVOConnection`) speaks TLS to kvod's TLS port (`--tls-port`): which authorities to trust, which
/// name the server's certificate must carry, and the client certificate to present. A value; any thread.
public struct TLSClientOptions: Sendable {
    /// PEM file with the authorities the server's certificate must verify against; nil: the system's.
    public var certificateAuthorityPath: String?
    /// PEM file with a client certificate to present (with `privateKeyPath`); nil: none.
    public var certificatePath: String?
    /// PEM file with the client certificate's private key.
    public var privateKeyPath: String?
    /// The name (DNS name or IP address) the server's certificate must carry, also sent as SNI; nil:
    /// the host connected to.
    public var serverName: String?

    /// Options trusting `certificateAuthorityPath` (nil: the system's authorities), presenting the client
    /// certificate at `certificatePath` with `privateKeyPath` if given, checking `serverName` (nil: the host).
    public init(certificateAuthorityPath: String? = nil, certificatePath: String? = nil, privateKeyPath: String? = nil,
                serverName: String? = nil) {
        self.certificateAuthorityPath = certificateAuthorityPath
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.serverName = serverName
    }
}
