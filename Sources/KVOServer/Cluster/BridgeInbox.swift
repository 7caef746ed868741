import CLibUV
import Synchronization
import KVOEngine
import KVOModel

/// The queue from the NATS bridge's threads to the loop thread: `post` appends under a mutex and wakes
/// the loop (`uv_async_send`); the loop's async callback takes the whole queue (`takeAll`), since libuv
/// coalesces wake-ups.
///
/// `post` may be called from any thread; `takeAll` and `invalidate` on the loop thread only. The handle
/// address is cleared under the mutex before the handle is closed, so a late `post` is queued and never
/// wakes a closed handle.
final class BridgeInbox: Sendable {
    private struct State: Sendable {
        var messages: [BridgeMessage] = []
        /// The `uv_async_t`'s address; 0 once invalidated.
        var handle: UInt = 0
    }

    private let state: Mutex<State>

    init(_ handle: UnsafeMutablePointer<uv_async_t>) {
        state = Mutex(State(messages: [], handle: UInt(bitPattern: handle)))
    }

    /// Any thread.
    func post(_ message: BridgeMessage) {
        state.withLock { state in
            state.messages.append(message)
            if let handle = UnsafeMutablePointer<uv_async_t>(bitPattern: state.handle) { uv_async_send(handle) }
        }
    }

    /// Loop thread: everything posted so far, oldest first.
    func takeAll() -> [BridgeMessage] {
        state.withLock { state in
            let messages = state.messages
            state.messages = []
            return messages
        }
    }

    /// Loop thread, before the handle is closed.
    func invalidate() {
        state.withLock { $0.handle = 0 }
    }
}
