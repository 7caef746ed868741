import Foundation

/// A pipe for a child process's output whose descriptors are closed on exec.
///
/// Foundation's `Pipe` makes inheritable descriptors, and tests start processes from several threads
/// at once: a child spawned by another test at the wrong moment can inherit this pipe's ends and keep
/// them open for as long as it lives. A reader then never sees end of file (a kvod log read to the
/// end blocks), and a writer never gets SIGPIPE after the reader closes. Both ends are made
/// close-on-exec right after `pipe` (Glibc does not export `pipe2`, which would do it atomically;
/// what is left is a window of two system calls); the child still gets its own copy, as stdout or
/// stderr, through the `dup2` that `Process` does. Same member names as `Pipe`.
final class ChildPipe: @unchecked Sendable {
    let fileHandleForReading: FileHandle
    let fileHandleForWriting: FileHandle

    init() {
        var descriptors: [Int32] = [-1, -1]
        let status = descriptors.withUnsafeMutableBufferPointer { pipe($0.baseAddress!) }
        precondition(status == 0, "pipe failed: \(String(cString: strerror(errno)))")
        for descriptor in descriptors { _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC) }
        fileHandleForReading = FileHandle(fileDescriptor: descriptors[0], closeOnDealloc: true)
        fileHandleForWriting = FileHandle(fileDescriptor: descriptors[1], closeOnDealloc: true)
    }

    /// Closes this process's copy of the write end, once the child has been started with its own:
    /// then the reader sees end of file when the child exits.
    func closeWritingEnd() {
        try? fileHandleForWriting.close()
    }
}
