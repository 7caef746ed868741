import Glibc
import KVOEngine
import KVOModel

/// A joinable pthread running one closure: the cluster's threads of their own (`NATSBridge`,
/// `SnapshotPublisher`), started and joined by the loop thread.
struct WorkerThread {
    private var thread = pthread_t()
    private(set) var isRunning = false

    /// Starts `body` on a new thread; `what` names it in the message if the system refuses one (fatal:
    /// kvod cannot run its cluster without it).
    mutating func start(_ what: String, _ body: @escaping () -> Void) {
        final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
        let retained = Unmanaged.passRetained(Box(body)).toOpaque()
        let status = pthread_create(&thread, nil, { argument in
            Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue().body()
            return nil
        }, retained)
        guard status == 0 else { fatalError("kvod: cannot start \(what) (pthread_create: \(status))") }
        isRunning = true
    }

    /// Waits for the thread to end, if it was started.
    mutating func join() {
        guard isRunning else { return }
        pthread_join(thread, nil)
        isRunning = false
    }
}
