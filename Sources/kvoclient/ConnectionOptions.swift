import ArgumentParser
import KVOClient
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

    /// The credentials read once in `validate()` (a prompt asks once; the client logs in with them again
    /// on every reconnection). Written during argument parsing, before any client exists; read afterwards
    /// by the task running the command.
    nonisolated(unsafe) private static var credentials: KVOClient.Credentials?

    /// The operations that change nothing: a lost connection during one of them says so (`KVODError.connectionLost`).
    private static let readOperations: Set<String> = ["get", "info", "list", "classes", "bindings", "ping", "userList",
                                                       "slow", "clients", "status", "config", "digest", "metrics"]

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
                Self.credentials = .password(user: user, password: password)
            } else if token {
                Self.credentials = .token(try SecretInput.read(environmentVariable: "KVOD_TOKEN", prompt: "Token: "))
            }
        } catch {
            throw ValidationError("\(user != nil ? "--user" : "--token"): \(error)")
        }
    }

    /// Connects a `KVOClient` to kvod (saying `hello` and, with `--user` or `--token`, logging in: a failed
    /// login is the server's `unauthenticated` error). `reconnection` nil (the default, for one-shot
    /// commands): a lost connection ends the client. `heartbeat` seconds of silence before a `ping`, and as
    /// long again for its answer (0: never). `requestTimeout` seconds per request (nil: no limit).
    func connect(reconnection: KVOClient.ReconnectionPolicy? = nil, heartbeat: Double = 10,
                 requestTimeout: Double? = 10) async throws -> KVOClient {
        let configuration = KVOClient.Configuration(
            host: host, port: port, tls: tlsOptions, credentials: Self.credentials, clientName: "kvoclient",
            reconnection: reconnection,
            heartbeatInterval: heartbeat > 0 ? heartbeat : .infinity, heartbeatTimeout: heartbeat > 0 ? heartbeat : .infinity,
            requestTimeout: requestTimeout)
        return try await KVOClient.connect(to: configuration)
    }

    /// Connects, sends one request and returns the reply's fields (without `id` and `ok`); throws
    /// `KVODError.server` for an `ok: false` reply. The connection is closed afterwards.
    @discardableResult
    func call(_ op: String, _ params: [String: JSONValue] = [:], timeout: Double? = 10) async throws -> [String: JSONValue] {
        let client = try await connect(requestTimeout: timeout)
        defer { client.close() }
        return try await Self.call(on: client, op, params)
    }

    /// Connects, runs `body` with the client (the typed calls: `kvod.set(keyPath, of: object, to: value)`)
    /// and closes the connection afterwards. `timeout` seconds per request (nil: no limit).
    func withClient<Result>(timeout: Double? = 10, _ body: (KVOClient) async throws -> Result) async throws -> Result {
        let client = try await connect(requestTimeout: timeout)
        defer { client.close() }
        return try await body(client)
    }

    /// Sends one request on `client` and returns the reply's fields.
    static func call(on client: KVOClient, _ op: String, _ params: [String: JSONValue] = [:]) async throws -> [String: JSONValue] {
        let reply = try await client.request(op, params, isWrite: !readOperations.contains(op))
        return reply.objectValue ?? [:]
    }
}
