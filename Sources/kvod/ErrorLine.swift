import Logging
#if canImport(Glibc)
import Glibc
#endif

/// One error line on standard error before kvod serves (a usage error, a setting that cannot be used), in the log's
/// format: `kvod: error: <message>` as text, or under `--log-format json` one JSON record as `JSONLogHandler` writes
/// every other line (level `error`, the message, the usage as a field of its own), so that a log shipper reading
/// kvod's JSON lines sees why it did not start. Any thread (the main thread, before the server exists).
enum ErrorLine {
    /// Writes it: `program: error: message`, then `usage` (when given) as text; one JSON line (with `exitCode`).
    static func write(program: String, message: String, usage: String?, exitCode: Int32, json: Bool) {
        if json {
            let logger = Logger(label: program) { JSONLogHandler(label: $0, level: LogLevelSetting(.error)) }
            var metadata: Logger.Metadata = ["exitCode": "\(exitCode)"]
            if let usage { metadata["usage"] = "\(usage)" }
            logger.error("\(message)", metadata: metadata)
            return
        }
        let text = "\(program): error: \(message)\n" + (usage.map { $0.hasSuffix("\n") ? $0 : $0 + "\n" } ?? "")
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }

    /// Whether `arguments` (or, when they set none, `KVOD_LOG_FORMAT` in `environment`) choose `--log-format json`:
    /// the last `--log-format` wins, as ArgumentParser takes it.
    static func logsJSON(_ arguments: [String], environment: [String: String]) -> Bool {
        var format = environment["KVOD_LOG_FORMAT"]
        var index = 0
        while index < arguments.count {
            let word = arguments[index]
            index += 1
            if word == "--" { break }
            if word.hasPrefix("--log-format=") {
                format = String(word.dropFirst("--log-format=".count))
            } else if word == "--log-format", index < arguments.count {
                format = arguments[index]
                index += 1
            }
        }
        return format == "json"
    }
}
