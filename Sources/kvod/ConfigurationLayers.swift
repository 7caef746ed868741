/// kvod's settings from its three sources, layered: the command line over `KVOD_…` environment variables over
/// the config file (`--config FILE`, or `KVOD_CONFIG`) over the defaults.
///
/// The file and the environment are turned into command-line arguments placed before the real ones, and for an
/// option the command line gives, neither is used at all (a list such as `--http-allowed-origin` is replaced,
/// not added to). ArgumentParser then parses and validates the whole as it parses any command line, so every
/// option of `KVOD` (`OptionCatalog`) can be set from the file and the environment, with the same checks, and
/// a flag added later needs no code here. Its errors are traced back to the file line or variable
/// (`sources(mentionedIn:)`). A value; made at start-up and on each SIGHUP reload.
struct ConfigurationLayers {
    /// One setting from the file or the environment, for an option the command line does not give.
    struct Setting: Equatable {
        let name: String
        /// The value(s); a flag's is `true` or `false`.
        let values: [String]
        let source: SettingSource
    }

    /// The settings from the file and the environment that are in force, in `OptionCatalog` order.
    let settings: [Setting]
    /// What ArgumentParser parses: the settings as arguments (`--name=value`), then the command line.
    let arguments: [String]
    /// The config file read, if any.
    let configPath: String?
    /// The `KVOD_…` variables that are no setting (a warning at start-up, an error under `--check-config`).
    let environmentCheck: EnvironmentCheck

    /// Options a config file cannot give: the file itself, and what kvod does with its settings.
    static let commandLineOnly: Set<String> = ["config", "check-config"]

    /// Words on the command line after which nothing is read from the file or environment: ArgumentParser
    /// answers them without running kvod, and a broken file must not hide the help.
    static let answeredWithoutRunning: Set<String> = ["-h", "--help", "--version", "--experimental-dump-help"]

    init(commandLine: [String], environment: [String: String], catalog: OptionCatalog = .kvod) throws(ConfigurationError) {
        if commandLine.contains(where: ConfigurationLayers.answeredWithoutRunning.contains) {
            self.settings = []
            self.arguments = commandLine
            self.configPath = nil
            self.environmentCheck = EnvironmentCheck(environment: [:], catalog: catalog)
            return
        }
        let given = ConfigurationLayers.optionsGiven(in: commandLine, catalog: catalog)
        var fromEnvironment: [String: Setting] = [:]
        // KVOD_CONFIG names the file; --check-config is a command, not a setting.
        for option in catalog.options where !given.names.contains(option.name) && option.name != "check-config" {
            guard let text = environment[option.environmentName], !text.isEmpty else { continue }
            let source = SettingSource.environment(variable: option.environmentName)
            let values = option.isRepeating ? text.split(separator: ",").map(String.init) : [text]
            fromEnvironment[option.name] = Setting(name: option.name, values: try ConfigurationLayers.checked(values, for: option, from: source),
                                                   source: source)
        }
        let configPath = given.configPath ?? fromEnvironment["config"]?.values.first
        var fromFile: [String: Setting] = [:]
        if let configPath {
            let file = try ConfigFile(path: configPath)
            for entry in file.entries {
                let source = SettingSource.file(path: configPath, line: entry.line)
                guard let option = catalog[entry.key] else {
                    throw .unknownKey(path: configPath, line: entry.line, key: entry.key, suggestion: catalog.suggestion(for: entry.key))
                }
                if ConfigurationLayers.commandLineOnly.contains(option.name) {
                    throw .badValue(source: source, key: entry.key, problem: "is given on the command line (or, for config, as KVOD_CONFIG), not in a config file")
                }
                if entry.isList, !option.isRepeating {
                    throw .badValue(source: source, key: entry.key, problem: "takes one value, not a list")
                }
                let values = try ConfigurationLayers.checked(entry.values, for: option, from: source)
                if let earlier = fromFile[option.name] {
                    guard option.isRepeating, case let .file(_, firstLine) = earlier.source else {
                        throw .badValue(source: source, key: entry.key, problem: "set twice (first on line \(earlier.source.line ?? 0))")
                    }
                    fromFile[option.name] = Setting(name: option.name, values: earlier.values + values,
                                                    source: .file(path: configPath, line: firstLine))
                } else {
                    fromFile[option.name] = Setting(name: option.name, values: values, source: source)
                }
            }
        }
        var settings: [Setting] = []
        var arguments: [String] = []
        for option in catalog.options where !given.names.contains(option.name) {
            guard let setting = fromEnvironment[option.name] ?? fromFile[option.name] else { continue }
            settings.append(setting)
            arguments += ConfigurationLayers.arguments(for: setting, of: option)
        }
        self.settings = settings
        self.arguments = arguments + commandLine
        self.configPath = configPath
        self.environmentCheck = EnvironmentCheck(environment: environment, catalog: catalog)
    }

    /// `--check-config`'s report: each setting from the file and the environment, with where it came from.
    var report: String {
        var text = ""
        for setting in settings {
            text += "\(setting.name) = \(setting.values.joined(separator: ", "))  (\(setting.source))\n"
        }
        return text + "configuration OK: \(settings.count) setting\(settings.count == 1 ? "" : "s") from \(configPath ?? "no config file") and the environment\n"
    }

    /// The settings (from the file or the environment) whose flag `message` names, as `--name`: where an error
    /// ArgumentParser gives about them came from. Empty when it names only flags of the command line.
    func sources(mentionedIn message: String) -> [SettingSource] {
        settings.filter { ConfigurationLayers.mentions(message, "--" + $0.name) }.map(\.source)
    }

    /// Whether `message` holds `flag` as a whole word (not `--tls-port` inside `--tls-port-x`).
    private static func mentions(_ message: String, _ flag: String) -> Bool {
        var rest = Substring(message)
        while let range = rest.firstRange(of: flag) {
            let next = rest[range.upperBound...].first
            if next.map({ !($0.isLetter || $0.isNumber || $0 == "-") }) ?? true { return true }
            rest = rest[range.upperBound...]
        }
        return false
    }

    /// Flags take `true` or `false` (also `1`, `0`, `yes`, `no`, written as `true` or `false`); options any text.
    private static func checked(_ values: [String], for option: OptionCatalog.Option, from source: SettingSource)
        throws(ConfigurationError) -> [String]
    {
        guard !option.takesValue else { return values }
        guard values.count == 1, let flag = ["true": true, "1": true, "yes": true, "false": false, "0": false, "no": false][values[0].lowercased()] else {
            throw .badValue(source: source, key: option.name, problem: "is a flag: true or false, not '\(values.joined(separator: ","))'")
        }
        return [flag ? "true" : "false"]
    }

    /// A setting as command-line arguments: `--name=value` per value; a flag as `--name` when true (or its
    /// inversion, `--no-name`, when false; a flag without one is simply not given).
    private static func arguments(for setting: Setting, of option: OptionCatalog.Option) -> [String] {
        guard option.takesValue else {
            if setting.values == ["true"] { return ["--" + option.name] }
            return option.inversion.map { [$0] } ?? []
        }
        return setting.values.map { "--\(option.name)=\($0)" }
    }

    /// The options the command line gives, by name, and its `--config` value.
    private static func optionsGiven(in commandLine: [String], catalog: OptionCatalog) -> (names: Set<String>, configPath: String?) {
        let values = commandLineValues(in: commandLine, catalog: catalog)
        return (Set(values.keys), values["config"]?.last)
    }

    /// The values the command line gives, by option name (a flag's `true`, or `false` for its inversion; a repeated
    /// option's values in order). Reads the words as ArgumentParser will: an option's value is the next word
    /// unless written `--name=value`; `--` ends options.
    static func commandLineValues(in commandLine: [String], catalog: OptionCatalog) -> [String: [String]] {
        var values: [String: [String]] = [:]
        var index = 0
        while index < commandLine.count {
            let word = commandLine[index]
            index += 1
            if word == "--" { break }
            guard word.hasPrefix("-"), let option = catalog.option(spelled: word) else { continue }
            guard option.takesValue else {
                values[option.name] = [option.inversion.map { word == $0 ? "false" : "true" } ?? "true"]
                continue
            }
            var value: String?
            if let equals = word.firstIndex(of: "=") {
                value = String(word[word.index(after: equals)...])
            } else if index < commandLine.count {
                value = commandLine[index]
                index += 1
            }
            guard let value else { values[option.name] = values[option.name] ?? []; continue }
            values[option.name] = option.isRepeating ? (values[option.name] ?? []) + [value] : [value]
        }
        return values
    }
}

extension SettingSource {
    /// The file line, for a setting from a file.
    var line: Int? {
        if case let .file(_, line) = self { return line }
        return nil
    }
}
