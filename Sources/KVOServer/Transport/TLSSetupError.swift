import COpenSSL
import KVOEngine
import KVOModel

/// Why a TLS context could not be made from the certificate, key and CA files: what failed and
/// OpenSSL's reason. Any thread.
public struct TLSSetupError: Error, CustomStringConvertible {
    /// What kvod was doing ("loading the private key from 'server.key'").
    public let operation: String
    /// OpenSSL's reasons, oldest first ("no such file", "key values mismatch").
    public let detail: String

    public var description: String { detail.isEmpty ? operation : "\(operation): \(detail)" }

    /// An error for `operation`, with (and clearing) the reasons in this thread's OpenSSL error queue.
    static func failed(_ operation: String) -> TLSSetupError {
        TLSSetupError(operation: operation, detail: TLSSetupError.takeOpenSSLErrors())
    }

    /// Drains this thread's OpenSSL error queue into one line of reasons, oldest first.
    static func takeOpenSSLErrors() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            guard code != 0 else { break }
            if let reason = ERR_reason_error_string(code) {
                let text = String(cString: reason)
                if !reasons.contains(text) { reasons.append(text) }
            } else {
                reasons.append("error \(code)")
            }
        }
        return reasons.joined(separator: "; ")
    }
}
