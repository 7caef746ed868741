import ArgumentParser
import KVOClientKit

/// `--host` and `--port`: where kvod listens. Accepted before or after the subcommand name.
struct ConnectionOptions: ParsableArguments {
    @Option(help: "The host kvod listens on (a name or an IPv4/IPv6 address).")
    var host: String = "127.0.0.1"

    @Option(parsing: .unconditional, help: "The TCP port kvod listens on.", transform: NumberArgument.port)
    var port: Int = 7420

    func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
    }

    /// Opens a connection to kvod.
    func connect() throws(KVOClientError) -> KVOConnection {
        try KVOConnection(host: host, port: port)
    }
}
