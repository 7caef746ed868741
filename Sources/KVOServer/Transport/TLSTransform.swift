import KVOEngine
import KVOModel

/// TLS as a connection's byte transform (`ConnectionTransform`): reads are decrypted before framing, and
/// at each flush the queued plaintext is encrypted into `ciphertext`, which is what goes to the socket.
extension TLSSession: ConnectionTransform {
    var metricsTransport: ConnectionKind { .tls }
    var isEstablished: Bool { isHandshakeComplete }
    var verifiedPeerName: String? { verifiedPeerCommonName }
    var outputCount: Int { ciphertext.count }

    func withOutput<Result>(_ body: (inout ChunkedOutputBuffer) -> Result) -> Result {
        body(&ciphertext)
    }

    func receive(_ bytes: UnsafeBufferPointer<UInt8>, loop: EventLoop,
                 deliver: (UnsafeBufferPointer<UInt8>) -> Bool) -> TransformOutcome {
        switch receive(bytes, scratch: loop.tlsPlaintextBuffer, deliver: deliver) {
        case .proceed: return .proceed
        case .peerClosed: return .peerClosed
        case let .failed(reason): return .failed(isHandshakeComplete ? .tlsError(reason) : .tlsHandshakeFailed(reason))
        }
    }

    func send(_ output: inout ChunkedOutputBuffer, loop: EventLoop) -> TransformOutcome {
        switch encrypt(&output, staging: loop.tlsStagingBuffer) {
        case .proceed: return .proceed
        case .peerClosed: return .peerClosed
        case let .failed(reason): return .failed(.tlsError(reason))
        }
    }

    /// Queues our close_notify, unless the peer left or the socket failed.
    func finish(reason: CloseReason) {
        switch reason {
        case .clientClosed, .socketError: break
        default: queueCloseNotify()
        }
    }
}
