import ArgumentParser
import KVOClientKit
import KVOCommandLine

/// `--host` and `--port`: where kvod listens; `--tls` and its files: how to reach kvod's TLS port.
/// Accepted before or after the subcommand name.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The host kvod listens on (a name or an IPv4/IPv6 address).")
    var host: String = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The TCP port kvod listens on (with --tls: its --tls-port).", transform: NumberArgument.port)
    var port: Int = 7420

    // TLS (kvod's --tls-port): kept together.

    @Flag(help: "Speak TLS (1.2 or 1.3) to kvod's TLS port, verifying its certificate.")
    var tls = false

    @Option(help: ArgumentHelp("PEM file with the authorities kvod's certificate must verify against (default: the system's).",
                               valueName: "file"))
    var cacert: String?

    @Option(help: ArgumentHelp("PEM file with a client certificate to present (kvod's --tls-client-auth).", valueName: "file"))
    var cert: String?

    @Option(help: ArgumentHelp("PEM file with the client certificate's private key (default: the --cert file).", valueName: "file"))
    var key: String?

    @Option(help: ArgumentHelp("The name kvod's certificate must carry, also sent as SNI (default: --host).", valueName: "name"))
    var serverName: String?

    func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
        if !tls, cacert != nil || cert != nil || key != nil || serverName != nil {
            throw ValidationError("--cacert, --cert, --key and --server-name need --tls")
        }
        if key != nil, cert == nil { throw ValidationError("--key needs --cert") }
    }

    /// The TLS options from the flags; nil without --tls.
    var tlsOptions: TLSClientOptions? {
        guard tls else { return nil }
        return TLSClientOptions(certificateAuthorityPath: cacert, certificatePath: cert, privateKeyPath: key, serverName: serverName)
    }

    /// Opens a connection to kvod.
    func connect() throws(KVOClientError) -> KVOConnection {
        try KVOConnection(host: host, port: port, tls: tlsOptions)
    }
}
