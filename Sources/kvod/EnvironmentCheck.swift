import KVOModel

/// The `KVOD_…` environment variables that are no setting of kvod's: a misspelt one (`KVOD_MAX_CONECTIONS`) would
/// otherwise be ignored without a word. kvod warns about each at start-up and `kvod --check-config` refuses them
/// (docs/protocol.md, "Configuration file, environment and reload").
///
/// Tolerated without a word: the variables other programs of the project read, which a shell that runs kvod often
/// holds too (kvoclient's and `kvod user`'s passwords and token, the Docker image's entrypoint, the benchmarks,
/// scripts and tests), and kvod's own measurement hooks. A value; made with `ConfigurationLayers`.
struct EnvironmentCheck: Equatable {
    /// Each unknown variable's name and the setting's variable it probably meant.
    let unknown: [(name: String, suggestion: String?)]

    static func == (left: EnvironmentCheck, right: EnvironmentCheck) -> Bool {
        left.unknown.map(\.name) == right.unknown.map(\.name)
    }

    /// Variables read by kvod outside its settings, or by other programs of the project.
    static let tolerated: Set<String> = [
        "KVOD_PASSWORD", "KVOD_NEW_PASSWORD", "KVOD_TOKEN",  // kvoclient, `kvod user add`/`passwd`
        "KVOD_ADMIN_USER", "KVOD_ADMIN_PASSWORD", "KVOD_ADMIN_PASSWORD_FILE", "KVOD_HEALTHCHECK_PORT",  // the Docker image
        "KVOD_GROUP_COMMIT_INTERVAL_US", "KVOD_TEST_CHECKPOINT_DELAY_MS",  // kvod's measurement and test hooks
        "KVOD_NATS_SERVER", "KVOD_BIN", "KVOD_BUILD", "KVOD_COMMIT", "KVOD_MANIFEST", "KVOD_JS", "KVOD_HTTP_PORT",
        "KVOD_LONG_TESTS", "KVOD_UPDATE_SCREENSHOT", "KVOD_IMAGE_LIMIT_MB", "KVOD_CLUSTER_DIR", "KVOD_AVAILABILITY_RUNS",
        "KVOD_DISTRIBUTED_GUESSERS", "KVOD_BRUTE_FORCE_ATTEMPTS", "KVOD_RELEASE_SCRATCH", "KVOD_TSAN_STEP",  // scripts and tests
    ]

    /// Families of variables of the scripts, benchmarks and tests.
    static let toleratedPrefixes = ["KVOD_BENCH_", "KVOD_TEST_", "KVOD_FAULT_", "KVOD_DOCKER_", "KVOD_READ_RULE_"]

    init(environment: [String: String], catalog: OptionCatalog) {
        let settings = catalog.options.map(\.environmentName)
        let known = Set(settings)
        unknown = environment.keys.sorted().filter { name in
            name.hasPrefix("KVOD_") && !known.contains(name) && !EnvironmentCheck.tolerated.contains(name)
                && !EnvironmentCheck.toleratedPrefixes.contains(where: name.hasPrefix)
        }.map { name in (name, NameSuggestion.closest(to: name, among: settings)) }
    }

    /// One line per unknown variable: "unknown environment variable KVOD_X (did you mean KVOD_Y?)…".
    var problems: [String] {
        unknown.map { variable in
            let hint = variable.suggestion.map { " (did you mean \($0)?)" } ?? ""
            return "unknown environment variable \(variable.name)\(hint): no setting of kvod's is called so (docs/protocol.md, \"Configuration file, environment and reload\")"
        }
    }
}
