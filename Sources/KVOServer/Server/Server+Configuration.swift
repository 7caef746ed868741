import KVOJSON

/// The `config` operation's reply (docs/protocol.md, `config`): every setting in force and where it came from, as
/// the daemon handed them over (`ServerConfiguration.settingsInForce`, at start-up and after each SIGHUP reload).
/// A server made without the daemon (tests, tools running it in-process) has none to report.
///
/// Loop thread only, like the rest of `Server`.
extension Server {
    func configurationReport() -> [(String, JSONValue)] {
        [("settings", .array(configuration.settingsInForce.map(\.reported)))]
    }
}
