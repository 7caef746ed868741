import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// kvod's log handler for `--log-format json`: one JSON object per line on standard error, for log shippers
/// (Fluent Bit, Vector, Loki's promtail, journald's JSON readers):
///
///     {"timestamp":"2026-11-20T09:14:03.123Z","level":"info","label":"kvod","message":"listening","address":"127.0.0.1:7420"}
///
/// `timestamp` is ISO 8601 in UTC with milliseconds; each metadata entry is a field of its own (a nested
/// value as a JSON array or object), except one named like the four fixed fields, which is written as
/// `metadata.<name>`. JSON escaping keeps every record on one line whatever a client sent (a raw newline or
/// ESC becomes `\n`, `\u001b`), and messages and metadata values are cut at `PrintableLogHandler`'s limits
/// (with the original length stated), so no line repeats megabytes a client sent. Each line is written with
/// one `write(2)`. A value; any thread.
struct JSONLogHandler: LogHandler {
    let label: String
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    /// The level every handler of kvod's shares (changed by a SIGHUP reload).
    private let level: LogLevelSetting

    init(label: String, level: LogLevelSetting, metadataProvider: Logger.MetadataProvider? = LoggingSystem.metadataProvider) {
        self.label = label
        self.level = level
        self.metadataProvider = metadataProvider
    }

    var logLevel: Logger.Level {
        get { level.level }
        set { level.level = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// The fields every record has, in this order; metadata entries with these names get a `metadata.` prefix.
    static let fixedFields: Set<String> = ["timestamp", "level", "label", "message"]

    func log(event: LogEvent) {
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { $1 } }
        if let explicit = event.metadata { fields.merge(explicit) { $1 } }
        var line: [UInt8] = []
        line.reserveCapacity(256)
        line.append(UInt8(ascii: "{"))
        JSONLogHandler.field("timestamp", into: &line)
        JSONWriter.writeString(JSONLogHandler.timestamp(), into: &line)
        JSONLogHandler.field("level", comma: true, into: &line)
        JSONWriter.writeString(event.level.rawValue, into: &line)
        JSONLogHandler.field("label", comma: true, into: &line)
        JSONWriter.writeString(label, into: &line)
        JSONLogHandler.field("message", comma: true, into: &line)
        JSONWriter.writeString(JSONLogHandler.bounded(event.message.description, limit: PrintableLogHandler.messageLimit), into: &line)
        for key in fields.keys.sorted() {
            JSONLogHandler.field(JSONLogHandler.fixedFields.contains(key) ? "metadata." + key : key, comma: true, into: &line)
            JSONLogHandler.write(fields[key]!, into: &line)
        }
        line.append(contentsOf: [UInt8(ascii: "}"), UInt8(ascii: "\n")])
        JSONLogHandler.writeToStandardError(line)
    }

    private static func field(_ name: String, comma: Bool = false, into line: inout [UInt8]) {
        if comma { line.append(UInt8(ascii: ",")) }
        JSONWriter.writeString(name, into: &line)
        line.append(UInt8(ascii: ":"))
    }

    /// A metadata value as JSON: text as a string (cut at `PrintableLogHandler.metadataValueLimit`), arrays and
    /// dictionaries as arrays and objects (keys sorted).
    private static func write(_ value: Logger.Metadata.Value, into line: inout [UInt8]) {
        switch value {
        case let .string(text):
            JSONWriter.writeString(bounded(text, limit: PrintableLogHandler.metadataValueLimit), into: &line)
        case let .stringConvertible(convertible):
            JSONWriter.writeString(bounded(convertible.description, limit: PrintableLogHandler.metadataValueLimit), into: &line)
        case let .array(values):
            line.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { line.append(UInt8(ascii: ",")) }
                write(element, into: &line)
            }
            line.append(UInt8(ascii: "]"))
        case let .dictionary(entries):
            line.append(UInt8(ascii: "{"))
            for (index, key) in entries.keys.sorted().enumerated() {
                field(key, comma: index > 0, into: &line)
                write(entries[key]!, into: &line)
            }
            line.append(UInt8(ascii: "}"))
        }
    }

    /// `text` cut after `limit` characters, with the original length stated as `PrintableText` does.
    static func bounded(_ text: String, limit: Int) -> String {
        guard text.utf8.count > limit else { return text }
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars.prefix(limit) { scalars.append(scalar) }
        guard scalars.count == limit, text.unicodeScalars.count > limit else { return text }
        return String(scalars) + "…(\(text.utf8.count) bytes)"
    }

    /// Now, as `2026-11-20T09:14:03.123Z`.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func digits(_ value: Int32, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(digits(parts.tm_year + 1900, 4))-\(digits(parts.tm_mon + 1, 2))-\(digits(parts.tm_mday, 2))T"
            + "\(digits(parts.tm_hour, 2)):\(digits(parts.tm_min, 2)):\(digits(parts.tm_sec, 2))."
            + "\(digits(Int32(now.tv_nsec / 1_000_000), 3))Z"
    }

    /// Writes the whole line to descriptor 2, retrying short writes and interruptions.
    private static func writeToStandardError(_ line: [UInt8]) {
        line.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(2, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }
}
