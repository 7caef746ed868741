import ArgumentParser
import KVOCommandLine
import KVOEngine
import KVOBuildCommit
import KVOServer
import KVOVersion
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// Checks of the flags that ArgumentParser cannot make alone (ranges, combinations, TLS files).
extension KVOD {
    func validate() throws {
        guard !host.isEmpty else { throw ValidationError("--host must not be empty") }
        guard (0...65535).contains(port) || port == KVOD.portOff else { throw ValidationError("--port must be 0...65535 or off") }
        try validateTLS()
        if let unix {
            guard !unix.isEmpty, unix.utf8.count < 108 else { throw ValidationError("--unix takes a path of 1 to 107 bytes") }
        } else if unixMode != nil {
            throw ValidationError("--unix-mode needs --unix")
        }
        guard unixModeBits != nil else { throw ValidationError("--unix-mode must be octal permission bits, e.g. 0600 or 0660") }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard ["text", "json"].contains(logFormat) else { throw ValidationError("--log-format must be text or json") }
        guard maxLine > 0 else { throw ValidationError("--max-line must be positive") }
        guard maxOutputBuffer > 0 else { throw ValidationError("--max-output-buffer must be positive") }
        guard maxTotalOutput > 0 else { throw ValidationError("--max-total-output must be positive") }
        guard maxTotalInput > 0 else { throw ValidationError("--max-total-input must be positive") }
        guard firstRequestTimeout >= 0, firstRequestTimeout.isFinite, firstRequestTimeout <= 1e9 else {
            throw ValidationError("--first-request-timeout must be 0 or more seconds")
        }
        guard idleTimeout >= 0, idleTimeout.isFinite, idleTimeout <= 1e9 else {
            throw ValidationError("--idle-timeout must be 0 or more seconds")
        }
        guard loginTimeout >= 0, loginTimeout.isFinite, loginTimeout <= 1e9 else {
            throw ValidationError("--login-timeout must be 0 or more seconds")
        }
        guard slowRequest >= 0, slowRequest.isFinite, slowRequest <= 1e9 else {
            throw ValidationError("--slow-request must be 0 or more milliseconds, at most 1000000000")
        }
        if let problem = sizeLimits.problem(outputBufferBytes: maxOutputBuffer) {
            throw ValidationError(problem)
        }
        guard maxConnections > 0 else { throw ValidationError("--max-connections must be positive") }
        guard SyncMode(rawValue: sync) != nil else { throw ValidationError("--sync must be full, normal or off") }
        guard history >= 0, historyBytes >= 0 else { throw ValidationError("--history and --history-bytes must not be negative") }
        guard walLimit >= SQLiteStore.minimumWALLimitBytes else {
            throw ValidationError("--wal-limit must be at least \(SQLiteStore.minimumWALLimitBytes) bytes")
        }
        if let users, !inMemory {
            throw ValidationError("--users '\(users)' goes with --in-memory; with --data the users live in the store (kvod user add --data DIR)")
        }
        if inMemory, replacesLostDatabase { throw ValidationError("--init goes with a data directory, not --in-memory") }
        if inMemory, let data {
            throw ValidationError("--data '\(data)' and --in-memory cannot be used together: --in-memory keeps nothing on disk")
        }
        if clusterSnapshotEvery < 0 { throw ValidationError("--cluster-snapshot-every must be 0 (never) or more") }
        if let clusterConfiguration {
            if node == nil { throw ValidationError("--cluster needs --node NAME (this node's name, unique in the cluster)") }
            if let problem = clusterConfiguration.problem { throw ValidationError(problem) }
        } else if node != nil || clusterStream != "kvod" || clusterWriteTimeout != 5
                    || clusterSnapshotEvery != Int(ClusterConfiguration.defaultSnapshotEvery)
                    || clusterCheckpointEvery != Int(ClusterConfiguration.defaultCheckpointEvery) {
            throw ValidationError("--node, --cluster-stream, --cluster-write-timeout, --cluster-snapshot-every and --cluster-checkpoint-every need --cluster")
        }
    }

    /// The TLS flags must come together: a port with a certificate and key; client certificates with a CA.
    private func validateTLS() throws {
        guard let clientAuthentication = TLSConfiguration.ClientAuthentication(rawValue: tlsClientAuth) else {
            throw ValidationError("--tls-client-auth must be none, optional or require")
        }
        guard tlsHandshakeTimeout.isFinite, tlsHandshakeTimeout <= 1e9 else {
            throw ValidationError("--tls-handshake-timeout must be 0 or more seconds")
        }
        if httpPort == nil, !httpAllowedOrigin.isEmpty || !httpAllowedHost.isEmpty || httpTLS {
            throw ValidationError("--http-allowed-origin, --http-allowed-host and --http-tls need --http-port")
        }
        if let name = httpAllowedHost.first(where: { !HTTPConfiguration.isValidAllowedHost($0) }) {
            throw ValidationError("--http-allowed-host takes a host name without port (IP addresses are always allowed), not '\(name)'")
        }
        if httpTLS, tlsPort == nil { throw ValidationError("--http-tls needs --tls-port, --tls-cert and --tls-key (the HTTP listener uses that certificate)") }
        if let httpPort, httpPort != 0, httpPort == port || httpPort == tlsPort {
            throw ValidationError("--http-port must differ from --port and --tls-port")
        }
        guard let tlsPort else {
            if port == KVOD.portOff, httpPort == nil, unix == nil {
                throw ValidationError("--port off needs --tls-port, --http-port or --unix: kvod would listen nowhere")
            }
            if tlsCert != nil || tlsKey != nil || tlsCa != nil || clientAuthentication != .none {
                throw ValidationError("--tls-cert, --tls-key, --tls-ca and --tls-client-auth need --tls-port")
            }
            return
        }
        guard (0...65535).contains(tlsPort) else { throw ValidationError("--tls-port must be 0...65535") }
        guard tlsCert != nil, tlsKey != nil else { throw ValidationError("--tls-port needs --tls-cert and --tls-key") }
        if tlsPort != 0, tlsPort == port { throw ValidationError("--tls-port must differ from --port") }
        if clientAuthentication != .none, tlsCa == nil {
            throw ValidationError("--tls-client-auth \(tlsClientAuth) needs --tls-ca (the authorities client certificates are verified against)")
        }
        if clientAuthentication == .none, tlsCa != nil {
            throw ValidationError("--tls-ca is used only to verify client certificates: give --tls-client-auth optional or require")
        }
    }

    /// Exit status for a usage error, as kvoclient's (ArgumentParser itself uses 64).
    static let usageExitCode: Int32 = 2
}
