import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Binding the listeners the configuration asks for, and closing them. Each listener carries what its
/// connections speak (`TransportStack`); `accept(from:status:)` builds the stages from it. A new listener
/// kind is a `Listener` file and one more `if` here. Loop thread only, like the rest of `Server`.
extension Server {
    /// Binds every configured listener, in the order their addresses are printed (plain, TLS, HTTP, Unix).
    /// On a failure the ones already bound stay in `listeners` (the caller closes them).
    func bindListeners() throws(TransportError) {
        let accept: (Listener, Int32) -> Void = { [unowned self] listener, status in
            self.accept(from: listener, status: status)
        }
        if configuration.listensForPlaintext {
            listeners.append(try TCPListener(loop: loop, host: configuration.host, port: configuration.port,
                                             role: .plain, stack: .lines, onConnection: accept))
        }
        if let tls = configuration.tls {
            listeners.append(try TCPListener(loop: loop, host: configuration.host, port: tls.port,
                                             role: .tls, stack: .tlsLines, onConnection: accept))
        }
        if let http = configuration.http {
            let bound = try TCPListener(loop: loop, host: http.host, port: http.port, role: .http,
                                        stack: .http(tls: http.usesTLS), onConnection: accept)
            listeners.append(bound)
            httpHostCheck = HTTPHostCheck(configuration: http, boundAddress: bound.addressDescription, port: bound.port)
        }
        if let unix = configuration.unixSocket {
            listeners.append(try UnixListener(loop: loop, path: unix.path, mode: mode_t(unix.mode), onConnection: accept))
        }
    }

    /// Closes every listener (a Unix one removes its socket file). Idempotent.
    func closeListeners() {
        for listener in listeners { listener.close() }
    }

    /// The stages a connection speaking `stack` starts with (TLS from the current context: open
    /// connections keep theirs when `reloadTLS()` replaces it).
    func makeStages(_ stack: TransportStack) -> (ConnectionTransform?, MessageFraming?) {
        var transform: ConnectionTransform?
        switch stack.transform {
        case nil: transform = nil
        case .tls:
            guard let tlsContext, let session = TLSSession(context: tlsContext, pool: loop.outputChunks) else {
                fatalError("out of memory creating a TLS session")
            }
            transform = session
        }
        let framing: MessageFraming? = switch stack.framing {
        case .lines: nil
        case .http: HTTPFraming(limits: HTTPRequestParser.Limits(bodyBytes: configuration.maximumLineLength))
        }
        return (transform, framing)
    }
}
