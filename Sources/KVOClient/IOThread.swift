#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starts a detached POSIX thread running `body`: the client's I/O thread, which blocks in `poll` and
/// `recv` so that no task of the cooperative pool ever does. The thread owns nothing but what `body`
/// captures.
enum IOThread {
    /// Holds the closure across the C call.
    private final class Box {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }

    static func start(_ body: @escaping @Sendable () -> Void) {
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        #if canImport(Glibc)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        let status = pthread_create(&thread, nil, { argument in
            #if canImport(Glibc)
            let box = Unmanaged<Box>.fromOpaque(argument!).takeRetainedValue()
            #else
            let box = Unmanaged<Box>.fromOpaque(argument).takeRetainedValue()
            #endif
            box.body()
            return nil
        }, box)
        guard status == 0 else { fatalError("KVOClient: cannot start its I/O thread (pthread_create: \(status))") }
        #if canImport(Glibc)
        pthread_detach(thread)
        #else
        if let thread { pthread_detach(thread) }
        #endif
    }
}
