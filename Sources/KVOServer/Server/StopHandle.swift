import CLibUV
import Synchronization
import KVOEngine
import KVOModel

/// Asks a running `Server` to stop, from any thread (the one thing that may cross threads).
///
/// Wraps the server's `uv_async_t`. The server clears the pointer under the mutex before closing
/// the handle, so a late `requestStop()` is a no-op rather than a use after free.
public final class StopHandle: Sendable {
    /// The handle's address (0 once invalidated); kept as an integer because pointers are not
    /// Sendable. Only dereferenced under the mutex, while the handle is known to be open.
    private let async: Mutex<UInt>

    init(_ async: UnsafeMutablePointer<uv_async_t>) {
        self.async = Mutex(UInt(bitPattern: async))
    }

    /// Wakes the loop and makes it stop. Safe to call from any thread, any number of times.
    public func requestStop() {
        async.withLock { address in
            if let handle = UnsafeMutablePointer<uv_async_t>(bitPattern: address) { uv_async_send(handle) }
        }
    }

    /// Loop thread: forget the handle before it is closed.
    func invalidate() {
        async.withLock { $0 = 0 }
    }
}
