import ArgumentParser
import KVOCommandLine

/// `--ttl SECONDS` of `create` and `set` (docs/protocol.md, "Expiry"): the object's time to live, after
/// which the server deletes it unless a write or a `touch` came first; `0` removes it.
struct TTLOption: ParsableArguments {
    @Option(name: .customLong("ttl"), parsing: .unconditional,
            help: ArgumentHelp("The object's time to live in seconds (0: none): it is deleted once that passes without a write or a touch.",
                               valueName: "seconds"),
            transform: NumberArgument.seconds)
    var seconds: Double?

    /// The ttl as the client library takes it, nil when not given.
    var duration: Duration? { seconds.map { Duration.milliseconds(Int64(($0 * 1000).rounded(.up))) } }
}
