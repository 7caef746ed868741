import ArgumentParser
import KVOJSON

/// kvod's options as ArgumentParser itself defines them, read from its help dump (the JSON of
/// `kvod --experimental-dump-help`): the settings a config file and `KVOD_…` environment variables may give.
/// A flag added to `KVOD` is in it without further code. Made once at start-up; a value; any thread.
struct OptionCatalog: Sendable {
    /// One option or flag of kvod's.
    struct Option: Sendable {
        /// Its long name without the dashes (`max-connections`): the config file's key.
        let name: String
        /// Every name that selects it on the command line, dashes included (`--max-connections`, `-h`).
        let spellings: [String]
        /// An option (takes a value), not a flag.
        let takesValue: Bool
        /// May be given more than once (`--http-allowed-origin`): a list in a config file.
        let isRepeating: Bool
        /// A flag's negative spelling, for `false` (`--no-thing`); nil when it has none.
        let inversion: String?
        /// Its default as `--help` shows it (`false` for a flag); nil when it has none (an option that is off, or
        /// whose default depends on other settings, as its help says).
        let defaultValue: String?

        /// The environment variable that sets it: `KVOD_` and the name in upper snake case.
        var environmentName: String { "KVOD_" + String(name.uppercased().map { $0 == "-" ? "_" : $0 }) }
    }

    /// In declaration order.
    let options: [Option]
    private let byName: [String: Int]
    private let bySpelling: [String: Int]

    /// ArgumentParser's own options, which are no settings.
    static let builtIn: Set<String> = ["help", "version", "experimental-dump-help"]

    /// kvod's options, from `KVOD`'s definitions.
    static let kvod = OptionCatalog(dump: KVOD._dumpHelp())

    /// Reads ArgumentParser's help dump (`ToolInfoV0`: `command.arguments[]` with `kind`, `names`,
    /// `preferredName`, `isRepeating`).
    init(dump: String) {
        var options: [Option] = []
        let arguments = (try? JSONParser.parse(dump))?.objectValue?["command"]?.objectValue?["arguments"]?.arrayValue ?? []
        for argument in arguments {
            guard let fields = argument.objectValue, let kind = fields["kind"]?.stringValue, kind != "positional",
                  let preferred = fields["preferredName"]?.objectValue, preferred["kind"]?.stringValue == "long",
                  let name = preferred["name"]?.stringValue, !OptionCatalog.builtIn.contains(name)
            else { continue }
            let names = (fields["names"]?.arrayValue ?? []).compactMap { entry -> String? in
                guard let entry = entry.objectValue, let text = entry["name"]?.stringValue else { return nil }
                return (entry["kind"]?.stringValue == "short" ? "-" : "--") + text
            }
            let inversion = names.first { $0 == "--no-" + name }
            let defaultValue = kind == "flag" ? "false"
                : fields["defaultValue"]?.stringValue ?? OptionCatalog.statedDefault(in: fields["abstract"]?.stringValue ?? "")
            options.append(Option(name: name, spellings: names.filter { $0 != inversion }, takesValue: kind == "option",
                                  isRepeating: fields["isRepeating"]?.boolValue ?? false, inversion: inversion,
                                  defaultValue: defaultValue))
        }
        self.options = options
        byName = Dictionary(options.enumerated().map { ($1.name, $0) }) { first, _ in first }
        var bySpelling: [String: Int] = [:]
        for (index, option) in options.enumerated() {
            for spelling in option.spellings + [option.inversion].compactMap({ $0 }) { bySpelling[spelling] = index }
        }
        self.bySpelling = bySpelling
    }

    /// The default an option's help states as `(default: VALUE)` (`KVOD.defaultNote`), one word: ArgumentParser shows
    /// no default for an option read with a `transform`, so kvod's help says it, and this reads it back. Nil when
    /// the help states none, or states it in words.
    static func statedDefault(in help: String) -> String? {
        guard let start = help.ranges(of: "(default: ").last else { return nil }
        let rest = help[start.upperBound...]
        guard let end = rest.firstIndex(of: ")") else { return nil }
        let value = rest[..<end]
        return value.isEmpty || value.contains(" ") ? nil : String(value)
    }

    subscript(name: String) -> Option? { byName[name].map { options[$0] } }

    /// The option a command-line word selects (`--port`, `--port=7420`, `--no-thing`), if any.
    func option(spelled word: String) -> Option? {
        let spelling = word.split(separator: "=", maxSplits: 1).first.map(String.init) ?? word
        return bySpelling[spelling].map { options[$0] }
    }

    /// The known name closest to an unknown one (at most two edits away), for "did you mean".
    func suggestion(for unknown: String) -> String? {
        let scored = options.map { ($0.name, OptionCatalog.editDistance(unknown, $0.name)) }.filter { $0.1 <= 2 }
        return scored.min { $0.1 < $1.1 }?.0
    }

    private static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a.utf8), b = Array(b.utf8)
        var row = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var previous = row[0]
            row[0] = i
            for j in stride(from: 1, through: b.count, by: 1) {
                let current = row[j]
                row[j] = a[i - 1] == b[j - 1] ? previous : 1 + min(previous, row[j], row[j - 1])
                previous = current
            }
        }
        return row[b.count]
    }
}
