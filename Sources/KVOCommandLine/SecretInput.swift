#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a secret (password, token) from an environment variable or, failing that, from a prompt on
/// the terminal with echo off; never from the command line, where other users see it in `ps`.
///
/// Used by `kvod user` and `kvoclient`, on their main thread.
public enum SecretInput {
    /// Why no secret could be read.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The value of `environmentVariable` if set and non-empty; else, when standard input is a
    /// terminal, what is typed after `prompt` (echo off; asked twice when `confirm`); else an error
    /// naming the variable.
    public static func read(environmentVariable: String, prompt: String, confirm: Bool = false) throws(Unavailable) -> String {
        if let value = getenv(environmentVariable).map({ String(cString: $0) }), !value.isEmpty { return value }
        guard isatty(0) == 1 else {
            throw Unavailable(description: "set \(environmentVariable), or run on a terminal to be asked (a secret is never taken from the command line)")
        }
        let first = try readWithoutEcho(prompt: prompt)
        if confirm {
            let second = try readWithoutEcho(prompt: "Again: ")
            guard first == second else { throw Unavailable(description: "the two entries differ") }
        }
        guard !first.isEmpty else { throw Unavailable(description: "nothing was entered") }
        return first
    }

    /// One line from the terminal on standard input with echo turned off (and back on after).
    private static func readWithoutEcho(prompt: String) throws(Unavailable) -> String {
        writeToStandardError(prompt)
        var saved = termios()
        let haveTerminal = tcgetattr(0, &saved) == 0
        if haveTerminal {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSAFLUSH, &quiet)
        }
        defer {
            if haveTerminal { tcsetattr(0, TCSAFLUSH, &saved) }
            writeToStandardError("\n")
        }
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(0, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            if count <= 0 || byte == 0x0A { break }
            bytes.append(byte)
            if bytes.count > 4096 { throw Unavailable(description: "the entry is too long") }
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static func writeToStandardError(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }
}
