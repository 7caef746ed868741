import KVOJSON
import Testing

@testable import KVOServer

/// `SettingInForce`, the `config` operation's row: its reply shape, and the one door that keeps credentials written
/// in a URL (`--cluster nats://user:password@host`) out of it.
@Suite struct SettingInForceTests {
    @Test("a URL's user part is shown as ***, wherever it is in the value; other text is left as it is", arguments: [
        ("nats://alice:s3cret@nats1:4222", "nats://***@nats1:4222"),
        ("nats://token123@nats1:4222,nats://bob:pw@nats2:4222", "nats://***@nats1:4222,nats://***@nats2:4222"),
        ("nats://nats1:4222,nats://nats2:4222", "nats://nats1:4222,nats://nats2:4222"),
        ("tls://u:p@h/path@x", "tls://***@h/path@x"),
        ("alice@example.com", "alice@example.com"),
        ("/var/lib/kvod", "/var/lib/kvod"),
    ])
    func credentialsHidden(_ given: String, _ shown: String) {
        expectEqual(SettingInForce.withoutCredentials(given), shown)
        let setting = SettingInForce(name: "cluster", values: [given], isList: false, source: .file, origin: "kvod.conf line 1",
                                     afterRestart: [given])
        #expect(setting.reported == ["name": "cluster", "value": .string(shown), "source": "file", "origin": "kvod.conf line 1",
                                     "afterRestart": .string(shown)])
        #expect(!setting.reported.description.contains("s3cret") && !setting.reported.description.contains("token123"))
    }

    @Test("a list is an array, an unset option null; origin and afterRestart only when known")
    func shapes() {
        #expect(SettingInForce(name: "http-allowed-host", values: ["a", "b"], isList: true, source: .environment,
                               origin: "KVOD_HTTP_ALLOWED_HOST").reported
                == ["name": "http-allowed-host", "value": ["a", "b"], "source": "environment", "origin": "KVOD_HTTP_ALLOWED_HOST"])
        #expect(SettingInForce(name: "tls-port", values: [], isList: false, source: .default).reported
                == ["name": "tls-port", "value": .null, "source": "default"])
    }
}
