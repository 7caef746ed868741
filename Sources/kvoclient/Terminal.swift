import KVOJSON
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Unbuffered writes to standard output and standard error, and process exit.
///
/// Every line goes straight to the file descriptor with `write(2)`, so a reader on the other end of a
/// pipe sees each line as soon as it is printed (there is no stdio buffer to flush).
enum Terminal {
    /// Writes `text` and a newline to standard output.
    static func printLine(_ text: String) {
        write(text + "\n", to: 1)
    }

    /// Writes `kvoclient: error: <message>` and a newline to standard error, with control characters
    /// in the message escaped (it may quote the server: ids, key paths, values) and a very long one cut.
    static func printError(_ message: String) {
        write("kvoclient: error: \(PrintableText.escaped(message, limit: 2_000))\n", to: 2)
    }

    /// Writes `text` verbatim to standard error.
    static func printToStandardError(_ text: String) {
        write(text, to: 2)
    }

    /// Restores SIGPIPE's default action (end the process), which a parent may have set to ignore,
    /// and unblocks it, which a parent may have blocked (a thread of Foundation's `Process` or of a
    /// dispatch queue passes its signal mask on): then `kvoclient subscribe ... | head -1` ends when
    /// `head` does, as other Unix tools do, instead of writing into a closed pipe forever. Socket
    /// writes are unaffected (they use MSG_NOSIGNAL).
    static func restoreBrokenPipeDefault() {
        signal(SIGPIPE, SIG_DFL)
        var signals = sigset_t()
        sigemptyset(&signals)
        sigaddset(&signals, SIGPIPE)
        pthread_sigmask(SIG_UNBLOCK, &signals, nil)
    }

    /// Ends the process with `code`.
    static func exit(_ code: Int32) -> Never {
        #if canImport(Glibc)
        Glibc.exit(code)
        #else
        Darwin.exit(code)
        #endif
    }

    private static func write(_ text: String, to descriptor: Int32) {
        let bytes = Array(text.utf8)
        var written = 0
        while written < bytes.count {
            let result = bytes.withUnsafeBytes { raw in
                #if canImport(Glibc)
                Glibc.write(descriptor, raw.baseAddress! + written, raw.count - written)
                #else
                Darwin.write(descriptor, raw.baseAddress! + written, raw.count - written)
                #endif
            }
            if result < 0 {
                if errno == EINTR { continue }
                return  // Nowhere left to report it: the reader went away.
            }
            written += result
        }
    }
}
