import KVOServer

/// Every setting of kvod's in force and where it came from, for the `config` operation (`SettingInForce`): made at
/// start-up from the command line and the layers under it (`ConfigurationLayers`), and kept up to date by each
/// SIGHUP reload (`ConfigurationReloader`), which hands the list to the server with the reloaded configuration.
///
/// Read from `OptionCatalog`, so a flag added later is listed without code here. `check-config` is a command, not a
/// setting, and is left out. A value; made and changed on the thread that parses (start-up, then the loop thread).
struct RunningSettings {
    /// In `OptionCatalog` order.
    private(set) var settings: [SettingInForce]
    private let catalog: OptionCatalog

    init(commandLine: [String], layers: ConfigurationLayers, catalog: OptionCatalog = .kvod) {
        self.catalog = catalog
        let given = ConfigurationLayers.commandLineValues(in: commandLine, catalog: catalog)
        let layered = Dictionary(layers.settings.map { ($0.name, $0) }) { first, _ in first }
        settings = catalog.options.filter { $0.name != "check-config" }.map { option in
            if let values = given[option.name] {
                return SettingInForce(name: option.name, values: values, isList: option.isRepeating, source: .flag)
            }
            if let setting = layered[option.name] { return RunningSettings.setting(setting, of: option, source: nil) }
            return RunningSettings.defaultSetting(of: option, source: .default)
        }
    }

    /// A reload applied `setting` (nil: no longer given, so back to its default) to the live option `name`.
    mutating func reloaded(_ name: String, to setting: ConfigurationLayers.Setting?) {
        guard let index = settings.firstIndex(where: { $0.name == name }), let option = catalog[name] else { return }
        settings[index] = setting.map { RunningSettings.setting($0, of: option, source: .reload) }
            ?? RunningSettings.defaultSetting(of: option, source: .reload)
    }

    /// A reload found `setting` (nil: no longer given) for `name`, which cannot change while kvod runs: what the next
    /// start takes (`afterRestart`); nil when that is what is in force.
    mutating func pending(_ name: String, _ setting: ConfigurationLayers.Setting?, differs: Bool) {
        guard let index = settings.firstIndex(where: { $0.name == name }), let option = catalog[name] else { return }
        settings[index].afterRestart = differs ? (setting?.values ?? option.defaultValue.map { [$0] } ?? []) : nil
    }

    private static func setting(_ setting: ConfigurationLayers.Setting, of option: OptionCatalog.Option,
                                source: SettingInForce.Source?) -> SettingInForce {
        switch setting.source {
        case let .file(path, line):
            return SettingInForce(name: option.name, values: setting.values, isList: option.isRepeating,
                                  source: source ?? .file, origin: "\(path) line \(line)")
        case let .environment(variable):
            return SettingInForce(name: option.name, values: setting.values, isList: option.isRepeating,
                                  source: source ?? .environment, origin: variable)
        case .commandLine:
            return SettingInForce(name: option.name, values: setting.values, isList: option.isRepeating, source: source ?? .flag)
        }
    }

    private static func defaultSetting(of option: OptionCatalog.Option, source: SettingInForce.Source) -> SettingInForce {
        SettingInForce(name: option.name, values: option.defaultValue.map { [$0] } ?? [], isList: option.isRepeating,
                       source: source, origin: source == .reload ? "default" : nil)
    }
}
