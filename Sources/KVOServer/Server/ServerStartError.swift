import KVOEngine
import KVOModel

/// Why a `Server` could not start.
public enum ServerStartError: Error, CustomStringConvertible {
    /// The data directory or database could not be opened or read.
    case storage(StorageError)
    /// The event loop or the listener could not be set up (for example, the port is taken).
    case transport(TransportError)
    /// Settings that cannot work together (for example a `--max-object-bytes` too large for
    /// `--max-output-buffer`); the text says which and why.
    case configuration(String)
    /// The TLS certificate, key or CA could not be loaded.
    case tls(TLSSetupError)

    public var description: String {
        switch self {
        case let .storage(error): return "storage: \(error)"
        case let .transport(error): return "\(error)"
        case let .configuration(problem): return problem
        case let .tls(error): return "TLS: \(error)"
        }
    }
}
