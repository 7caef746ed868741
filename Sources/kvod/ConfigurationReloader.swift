import ArgumentParser
import KVOServer
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// SIGHUP's part in the daemon (`ServerConfiguration.reload`): reads the config file and the environment again,
/// layers them under the same command line as at start-up (`ConfigurationLayers`), has ArgumentParser parse and
/// validate the result as `KVOD`, and returns the server settings made from it, of which the server applies the
/// live ones (`Server.applyLiveSettings(from:)`).
///
/// Each setting that changed is logged: a live one as applied, any other (ports, data directory, storage,
/// cluster, history, size limits, log format, and any flag added later until it is listed here) in one warning
/// line that says it keeps its running value until a restart. The log level is applied here (it is the
/// daemon's). An invalid file throws, with the line and setting, and changes nothing.
///
/// Loop thread only (the server calls it from its SIGHUP handler); `@unchecked Sendable` for the closure in
/// `ServerConfiguration`, which runs there alone.
final class ConfigurationReloader: @unchecked Sendable {
    /// The settings a reload applies while kvod runs; keep in step with `Server.applyLiveSettings(from:)`.
    static let liveSettings: Set<String> = [
        "log-level", "max-connections", "max-total-output", "max-total-input", "max-line", "max-pending-requests",
        "first-request-timeout", "login-timeout", "idle-timeout", "max-observations-per-connection",
        "tls-cert", "tls-key", "tls-ca", "tls-client-auth", "tls-handshake-timeout", "max-disk",
        "slow-request",
    ]

    private let commandLine: [String]
    /// The settings from the file and the environment in force: as at start-up, with the live ones reloaded since.
    private var running: [String: ConfigurationLayers.Setting]
    /// Every setting in force with its source, for the `config` operation: as at start-up, then as each reload left it.
    private(set) var inForce: RunningSettings
    /// The ports the listeners bound, by option (`port`, `tls-port`, `http-port`), set once the server listens: what a
    /// warning about a port that cannot change names (with `--port 0`, the port picked, not 0).
    var boundPorts: [String: Int] = [:]
    private let level: LogLevelSetting
    private let logger: Logger

    init(commandLine: [String], layers: ConfigurationLayers, level: LogLevelSetting, logger: Logger) {
        self.commandLine = commandLine
        running = Dictionary(layers.settings.map { ($0.name, $0) }) { first, _ in first }
        inForce = RunningSettings(commandLine: commandLine, layers: layers)
        self.level = level
        self.logger = logger
    }

    func reload() throws(ConfigurationError) -> ServerConfiguration {
        let layers = try ConfigurationLayers(commandLine: commandLine, environment: ConfigurationReloader.processEnvironment())
        let command: KVOD
        do {
            command = try KVOD.parse(layers.arguments)
        } catch {
            let message = KVOD.message(for: error)
            throw .refused(message: message, sources: layers.sources(mentionedIn: message))
        }
        let fresh = Dictionary(layers.settings.map { ($0.name, $0) }) { first, _ in first }
        var settings = inForce
        for option in OptionCatalog.kvod.options {
            let before = running[option.name], after = fresh[option.name]
            let isLive = ConfigurationReloader.liveSettings.contains(option.name)
            if !isLive { settings.pending(option.name, after, differs: before?.values != after?.values) }
            guard before?.values != after?.values else { continue }
            if isLive {
                logger.notice("config reload: \(option.name) \(ConfigurationReloader.shown(before)) -> \(ConfigurationReloader.shown(after))")
                running[option.name] = after
                settings.reloaded(option.name, to: after)
            } else {
                logger.warning("""
                    config reload: \(option.name) cannot change while kvod runs: keeping \(keptValue(option.name, before)) \
                    until a restart (\(after.map { "\($0.source) has \(ConfigurationReloader.shown($0))" } ?? "now unset"))
                    """)
            }
        }
        if let logLevel = Logger.Level(rawValue: command.logLevel) { level.level = logLevel }
        inForce = settings
        var configuration = command.serverConfiguration(logger: logger)
        configuration.settingsInForce = settings.settings
        return configuration
    }

    /// What a setting that cannot change keeps, for the warning: a listener's port as bound (`--port 0` picked one),
    /// anything else as given.
    private func keptValue(_ name: String, _ setting: ConfigurationLayers.Setting?) -> String {
        guard let port = boundPorts[name] else { return ConfigurationReloader.shown(setting) }
        return "the port it bound, \(port)"
    }

    private static func shown(_ setting: ConfigurationLayers.Setting?) -> String {
        guard let setting else { return "(default)" }
        return setting.values.joined(separator: ",")
    }

    /// The process's environment now (`environ`), as name -> value.
    static func processEnvironment() -> [String: String] {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") {
                variables[String(text[..<equals])] = String(text[text.index(after: equals)...])
            }
            entry += 1
        }
        return variables
    }
}
