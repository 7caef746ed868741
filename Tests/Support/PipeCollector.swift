import Foundation

/// Reads a child's output pipe to its end on a thread of its own and keeps what arrived.
///
/// Why not `FileHandle.readabilityHandler`: each handler arms a libdispatch read source, and tests
/// start and stop many children at once from several threads. On Linux that churn can leave a freed
/// epoll note in libdispatch's bookkeeping, and its manager thread then crashes the whole test process
/// in `_dispatch_event_loop_drain` (swift-corelibs-libdispatch issue 949; it crashed the ThreadSanitizer
/// run of the client tests once). A blocking `read` on a plain thread has no shared state to corrupt.
///
/// Ownership: the reading thread holds this object (and the handle it reads) until end of file, which
/// comes when every copy of the write end is closed, i.e. when the child exits. `bytes` and `waitForEnd`
/// may be called from any thread.
final class PipeCollector: @unchecked Sendable {
    private let handle: FileHandle
    private let lock = NSLock()
    private var collected = Data()
    private var reachedEnd = false
    private let ended = DispatchSemaphore(value: 0)

    /// Starts reading `handle` (the read end of a pipe whose write end this process has closed).
    init(reading handle: FileHandle) {
        self.handle = handle
        let thread = Thread { [self] in readToEnd() }
        thread.name = "pipe collector"
        thread.start()
    }

    private func readToEnd() {
        let descriptor = handle.fileDescriptor
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                lock.lock()
                collected.append(contentsOf: buffer[0..<count])
                lock.unlock()
            } else if count < 0, errno == EINTR {
                continue
            } else {
                break
            }
        }
        lock.lock()
        reachedEnd = true
        lock.unlock()
        ended.signal()
    }

    /// Everything read so far.
    var bytes: Data {
        lock.lock()
        defer { lock.unlock() }
        return collected
    }

    /// Waits (up to `timeout` seconds) until the pipe reached its end; true if it did.
    @discardableResult
    func waitForEnd(timeout: Double) -> Bool {
        lock.lock()
        let already = reachedEnd
        lock.unlock()
        if already { return true }
        guard ended.wait(timeout: .now() + timeout) == .success else { return false }
        ended.signal()  // later waiters see the end too
        return true
    }
}
