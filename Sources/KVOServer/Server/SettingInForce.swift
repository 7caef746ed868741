import KVOJSON

/// One of the daemon's settings as the running server holds it, with where its value came from: a row of the
/// `config` operation's reply (docs/protocol.md, `config`). The daemon makes the list (it knows its flags and their
/// layers: `ConfigurationLayers`) at start-up and after each SIGHUP reload, and hands it to the server in
/// `ServerConfiguration.settingsInForce`; the server only reports it (`Server.configurationReport()`), through
/// `reported`, the one door that hides credentials. A value; any thread.
public struct SettingInForce: Sendable, Equatable {
    /// Where the value in force came from.
    public enum Source: String, Sendable {
        /// Not given anywhere: the flag's default.
        case `default`
        /// The config file (`--config`, `KVOD_CONFIG`) read at start-up.
        case file
        /// A `KVOD_…` environment variable at start-up.
        case environment
        /// The command line.
        case flag
        /// A SIGHUP reload changed it (from the file or the environment, or back to its default).
        case reload
    }

    /// The flag's long name without the dashes (`max-connections`), as in a config file.
    public var name: String
    /// The value as text (a flag's `true` or `false`); several for a repeatable option; none for an option with no
    /// default that is not given.
    public var values: [String]
    /// Whether the option may be given more than once (its value is then a list).
    public var isList: Bool
    public var source: Source
    /// Where exactly: `kvod.conf line 3`, `KVOD_MAX_CONNECTIONS`; nil for the command line and the defaults.
    public var origin: String?
    /// For a setting a reload could not change while kvod runs: what the file and environment give now (empty:
    /// its default), taken at the next start. Nil when that is what is in force.
    public var afterRestart: [String]?

    public init(name: String, values: [String], isList: Bool, source: Source, origin: String? = nil, afterRestart: [String]? = nil) {
        self.name = name
        self.values = values
        self.isList = isList
        self.source = source
        self.origin = origin
        self.afterRestart = afterRestart
    }

    /// The reply's object: `name`, `value` (a string; an array for a list; null when unset), `source`, and `origin`
    /// and `afterRestart` when known. Credentials in a URL's user part (`nats://user:password@host`) are shown as
    /// `***`; the settings hold no other secrets (key, users and certificate files are named by their paths, never
    /// read here).
    var reported: JSONValue {
        var members: [String: JSONValue] = [
            "name": .string(name), "value": Self.value(values, isList: isList), "source": .string(source.rawValue),
        ]
        if let origin { members["origin"] = .string(origin) }
        if let afterRestart { members["afterRestart"] = Self.value(afterRestart, isList: isList) }
        return .object(members)
    }

    private static func value(_ values: [String], isList: Bool) -> JSONValue {
        let shown = values.map(withoutCredentials)
        if isList { return .array(shown.map(JSONValue.string)) }
        return shown.first.map(JSONValue.string) ?? .null
    }

    /// `text` with the user part of every URL in it (`scheme://user:password@`) replaced by `***`, so that a
    /// password or token written in a URL (`--cluster nats://user:secret@host:4222`) is never shown.
    static func withoutCredentials(_ text: String) -> String {
        guard text.contains("@"), text.contains("://") else { return text }
        var result = ""
        var rest = Substring(text)
        while let scheme = rest.firstRange(of: "://") {
            result += rest[..<scheme.upperBound]
            rest = rest[scheme.upperBound...]
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "," || $0 == " " } ?? rest.endIndex
            if let at = rest[..<authorityEnd].lastIndex(of: "@") {
                result += "***"
                rest = rest[at...]
            }
        }
        return result + rest
    }
}
