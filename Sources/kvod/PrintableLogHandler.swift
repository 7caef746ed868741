import KVOJSON
import Logging

/// kvod's log handler: swift-log's `StreamLogHandler` on standard error, with every message and
/// metadata value passed through `PrintableText.escaped`, so that no log line holds a raw control
/// character (a client's `"evil\nroot"` id cannot forge a second line, an ESC sequence cannot repaint the
/// operator's terminal) and no line repeats megabytes a client sent. `--log-format text`, the default.
///
/// The server already escapes what it quotes from clients at the source (binding events, restore
/// problems); this closes the class for every line kvod logs, present or future. A value; any thread.
struct PrintableLogHandler: LogHandler {
    /// Longest message, in characters, before it is cut (with its length stated).
    static let messageLimit = 4096
    /// Longest metadata value, in characters.
    static let metadataValueLimit = 512

    private var stream: StreamLogHandler
    /// The level every handler of kvod's shares (changed by a SIGHUP reload).
    private let level: LogLevelSetting

    init(label: String, level: LogLevelSetting) {
        stream = StreamLogHandler.standardError(label: label)
        self.level = level
    }

    var logLevel: Logger.Level {
        get { level.level }
        set { level.level = newValue }
    }

    var metadata: Logger.Metadata {
        get { stream.metadata }
        set { stream.metadata = newValue }
    }

    var metadataProvider: Logger.MetadataProvider? {
        get { stream.metadataProvider }
        set { stream.metadataProvider = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { stream[metadataKey: key] }
        set { stream[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        // A line the server already escaped at the source (its backslashes doubled) is left alone, not
        // escaped twice; one with a raw control character is escaped whole.
        let text = event.message.description
        if PrintableText.containsControlCharacters(text) || text.utf8.count > PrintableLogHandler.messageLimit {
            event.message = "\(PrintableText.escaped(text, limit: PrintableLogHandler.messageLimit))"
        }
        if let metadata = event.metadata {
            event.metadata = metadata.mapValues(PrintableLogHandler.printable)
        }
        stream.log(event: event)
    }

    /// A metadata value as escaped text.
    private static func printable(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        let text = value.description
        guard PrintableText.containsControlCharacters(text) || text.utf8.count > metadataValueLimit else { return value }
        return .string(PrintableText.escaped(text, limit: metadataValueLimit))
    }
}
