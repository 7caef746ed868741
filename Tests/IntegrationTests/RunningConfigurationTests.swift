import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 42, item 5, over the real kvod: the `config` operation lists every setting in force with where it came
/// from (default, file, environment, flag) and, after a SIGHUP reload, the live settings it changed (source
/// `reload`) and what the settings it could not change become at the next start; no secret is shown. Item 10:
/// the SIGHUP warning about a port names the port bound.
@Suite("running configuration (config operation, SIGHUP provenance)")
struct RunningConfigurationTests {
    /// `config`'s settings by name.
    private func settings(_ server: KVODProcess) throws -> [String: JSONValue] {
        let list = try #require(try server.connect().call("config")["settings"]?.arrayValue)
        var byName: [String: JSONValue] = [:]
        for setting in list { byName[setting["name"]?.stringValue ?? "?"] = setting }
        expectEqual(byName.count, list.count, "each setting once")
        return byName
    }

    /// Waits until kvod has logged `count` SIGHUP reloads (signals sent close together could be taken as one).
    private func waitForReloads(_ server: KVODProcess, _ count: Int, timeout: Double = 5) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if server.log.components(separatedBy: "received signal SIGHUP: reloading").count - 1 >= count { return true }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    @Test("config shows each setting's value and source: flag, file (with its line), environment (its variable), default")
    func provenance() throws {
        let directory = try TemporaryDirectory("running-config")
        let file = directory.appending("kvod.conf")
        try ConfigurationFileTests.write("# limits\nmax-connections = 50\nhistory = 100\nhttp-port = 0\nhttp-allowed-host = [\"a.example\", \"b.example\"]\n",
                                         to: file)
        let server = try KVODProcess(["--config", file, "--max-pending-requests", "7"],
                                     environment: ["KVOD_MAX_LINE": "65536", "KVOD_PASSWORD": "hunter2-not-a-setting"])
        let settings = try settings(server)
        #expect(settings["max-connections"] == ["name": "max-connections", "value": "50", "source": "file",
                                                "origin": .string("\(file) line 2")], "\(settings["max-connections"] ?? .null)")
        #expect(settings["history"]?["source"] == "file" && settings["history"]?["value"] == "100")
        expectEqual(settings["http-allowed-host"]?["value"], ["a.example", "b.example"], "a list: \(settings["http-allowed-host"] ?? .null)")
        expectEqual(settings["max-line"], ["name": "max-line", "value": "65536", "source": "environment", "origin": "KVOD_MAX_LINE"])
        expectEqual(settings["max-pending-requests"], ["name": "max-pending-requests", "value": "7", "source": "flag"])
        #expect(settings["port"]?["source"] == "flag" && settings["port"]?["value"] == "0")
        #expect(settings["config"]?["value"] == .string(file) && settings["config"]?["source"] == "flag")
        // Defaults: as --help states them, also for options ArgumentParser reads with a transform.
        expectEqual(settings["login-timeout"], ["name": "login-timeout", "value": "60.0", "source": "default"], "\(settings["login-timeout"] ?? .null)")
        #expect(settings["max-output-buffer"]?["value"] == .string(String(32 << 20)) && settings["max-output-buffer"]?["source"] == "default")
        #expect(settings["sync"]?["value"] == "normal" && settings["insecure-open"]?["value"] == "false")
        #expect(settings["tls-port"]?["value"] == .null && settings["http-allowed-origin"]?["value"] == [])
        expectEqual(settings["check-config"], nil, "a command, not a setting")
        // Every option of kvod's is there (the help dump's, less the built-in ones and check-config).
        let dump = try ConfigurationFileTests.runKVOD(["--experimental-dump-help"])
        let options = dump.stdout.components(separatedBy: "\"preferredName\"").count - 1
        #expect(settings.count >= 45 && settings.count <= options, "\(settings.count) of \(options)")
        // No environment variable that is not a setting, and nothing of the users' secrets, ever.
        let whole = try server.connect().call("config")
        #expect(!JSONValue.object(whole).description.contains("hunter2"))
        expectEqual(server.stop(), 0)
    }

    @Test("after SIGHUP, a changed live setting says reload; one that needs a restart keeps its value and says what comes next")
    func afterReload() throws {
        let directory = try TemporaryDirectory("running-config")
        let file = directory.appending("kvod.conf")
        try ConfigurationFileTests.write("max-connections = 50\nhistory = 100\nlogin-timeout = 20\n", to: file)
        let server = try KVODProcess(["--config", file])
        expectEqual(try settings(server)["max-connections"]?["source"], "file")

        try ConfigurationFileTests.write("max-connections = 60\nhistory = 200\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("config reload: max-connections 50 -> 60"), "\(server.log)")
        #expect(server.waitForLog("config reload: login-timeout 20 -> (default)"), "\(server.log)")
        let reloaded = try settings(server)
        #expect(reloaded["max-connections"] == ["name": "max-connections", "value": "60", "source": "reload",
                                                "origin": .string("\(file) line 1")], "\(reloaded["max-connections"] ?? .null)")
        #expect(reloaded["login-timeout"] == ["name": "login-timeout", "value": "60.0", "source": "reload", "origin": "default"],
                "\(reloaded["login-timeout"] ?? .null)")
        #expect(reloaded["history"] == ["name": "history", "value": "100", "source": "file", "origin": .string("\(file) line 2"),
                                        "afterRestart": "200"], "\(reloaded["history"] ?? .null)")
        expectEqual(reloaded["max-line"]?["source"], "default", "untouched settings keep their source")

        // Back to the running value: nothing pending any more. A file that fails to load changes nothing.
        try ConfigurationFileTests.write("max-connections = 60\nhistory = 100\n", to: file)
        server.send(signal: SIGHUP)
        #expect(waitForReloads(server, 2), "\(server.log)")
        try ConfigurationFileTests.write("max-connections = lots\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("configuration reload failed"), "\(server.log)")
        let after = try settings(server)
        expectEqual(after["history"]?["afterRestart"], nil, "\(after["history"] ?? .null)")
        #expect(after["max-connections"]?["value"] == "60" && after["max-connections"]?["source"] == "reload")
        expectEqual(server.stop(), 0)
    }

    @Test("the SIGHUP warning about a listener's port names the port it bound, not the 0 it was given")
    func reloadWarningNamesBoundPort() throws {
        let directory = try TemporaryDirectory("running-config")
        let file = directory.appending("kvod.conf")
        try ConfigurationFileTests.write("http-port = 0\n", to: file)
        let server = try KVODProcess(["--config", file])
        // The port bound, as `status` lists the listeners.
        let listeners = try #require(try server.connect().call("status")["listeners"]?.arrayValue)
        let address = try #require(listeners.first { $0["role"] == "http-port" }?["address"]?.stringValue, "\(listeners)")
        let httpPort = try #require(address.split(separator: ":").last.flatMap { Int($0) })
        #expect(httpPort > 0)
        try ConfigurationFileTests.write("http-port = 1\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("config reload: http-port cannot change while kvod runs: keeping the port it bound, \(httpPort) until a restart"),
                "\(server.log)")
        #expect(!server.log.contains("keeping 0"), "\(server.log)")
        expectEqual(try settings(server)["http-port"]?["afterRestart"], "1")
        expectEqual(server.stop(), 0)
    }
}
