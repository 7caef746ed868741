import ArgumentParser
import KVOClientKit
import KVOCommandLine
import KVOJSON

/// `--host` and `--port`: where kvod listens; `--tls` and its files: how to reach kvod's TLS port;
/// `--user` or `--token`: who to log in as. Accepted before or after the subcommand name.
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

    @Option(help: ArgumentHelp(
        "Log in as this user first; the password comes from KVOD_PASSWORD or is asked for on a terminal (never from the command line).",
        valueName: "name"))
    var user: String?

    @Flag(help: "Log in with the API token in KVOD_TOKEN (or asked for on a terminal) first.")
    var token = false

    /// The credentials read once in `validate()` (a prompt asks once, even when `subscribe` reconnects).
    /// Main thread only.
    nonisolated(unsafe) private static var credentials: [String: JSONValue]?

    /// The TLS options from the flags; nil without --tls.
    var tlsOptions: TLSClientOptions? {
        guard tls else { return nil }
        return TLSClientOptions(certificateAuthorityPath: cacert, certificatePath: cert, privateKeyPath: key, serverName: serverName)
    }

    mutating func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
        if !tls, cacert != nil || cert != nil || key != nil || serverName != nil {
            throw ValidationError("--cacert, --cert, --key and --server-name need --tls")
        }
        if key != nil, cert == nil { throw ValidationError("--key needs --cert") }
        if user != nil, token { throw ValidationError("--user and --token cannot be used together") }
        do {
            if let user {
                let password = try SecretInput.read(environmentVariable: "KVOD_PASSWORD", prompt: "Password for \(user): ")
                Self.credentials = ["user": .string(user), "password": .string(password)]
            } else if token {
                Self.credentials = ["token": .string(try SecretInput.read(environmentVariable: "KVOD_TOKEN", prompt: "Token: "))]
            }
        } catch {
            throw ValidationError("\(user != nil ? "--user" : "--token"): \(error)")
        }
    }

    /// Opens a connection to kvod and, with `--user` or `--token`, logs in on it (a failed login is
    /// the server's `unauthenticated` error).
    func connect() throws(KVOClientError) -> KVOConnection {
        let connection = try KVOConnection(host: host, port: port, tls: tlsOptions)
        if let credentials = Self.credentials {
            try connection.call("auth", credentials)
        }
        return connection
    }
}
