import ArgumentParser
import KVOClientKit
import KVOCommandLine
import KVOJSON

/// `--host` and `--port`: where kvod listens; `--user` or `--token`: who to log in as. Accepted before
/// or after the subcommand name.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The host kvod listens on (a name or an IPv4/IPv6 address).")
    var host: String = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The TCP port kvod listens on.", transform: NumberArgument.port)
    var port: Int = 7420

    @Option(help: ArgumentHelp(
        "Log in as this user first; the password comes from KVOD_PASSWORD or is asked for on a terminal (never from the command line).",
        valueName: "name"))
    var user: String?

    @Flag(help: "Log in with the API token in KVOD_TOKEN (or asked for on a terminal) first.")
    var token = false

    /// The credentials read once in `validate()` (a prompt asks once, even when `subscribe` reconnects).
    /// Main thread only.
    nonisolated(unsafe) private static var credentials: [String: JSONValue]?

    mutating func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
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
        let connection = try KVOConnection(host: host, port: port)
        if let credentials = Self.credentials {
            try connection.call("auth", credentials)
        }
        return connection
    }
}
