import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 42, items 4, 5 and 10, as the real binaries: `kvoclient status`, `config`, `digest` and `metrics` (human
/// output and `--json`; server admins only, a non-admin's exit 1 with `forbidden` and nothing printed); kvod's usage
/// and configuration errors as one JSON line under `--log-format json`; every numeric flag's default in `kvod --help`.
@Suite("kvoclient status, config, digest, metrics; kvod's error lines and help defaults")
struct CLIServerStateTests {
    @Test("kvoclient status prints the revision, objects and connections; --json is the reply; digest and metrics too")
    func statusDigestMetrics() throws {
        let scratch = try TemporaryDirectory("cli-status")
        let server = try KVODProcess(storage: .directory(scratch.appending("data")))
        for (index, arguments) in [["create", "room", #"{"n":1}"#], ["set", "room", "n", "2"], ["set", "room", "n", "3"]].enumerated() {
            let result = try KVOClientProcess.run(server, arguments)
            #expect(result.status == 0 && result.stdout == "rev \(index + 1)\n", "\(result.stderr)")
        }
        let human = try KVOClientProcess.run(server, ["status"])
        expectEqual(human.status, 0, "\(human.stderr)")
        let lines = human.stdout.split(separator: "\n").map(String.init)
        #expect(lines.contains("revision     3"), "\(human.stdout)")
        #expect(lines.contains("objects      1"), "\(human.stdout)")
        #expect(lines.contains("connections  1 (http 0, tcp 1, tls 0, unix 0, websocket 0)"), "the asking one: \(human.stdout)")
        #expect(lines.contains("listening    127.0.0.1:\(server.port) (port)"), "\(human.stdout)")
        #expect(lines.contains("alarms       none") && lines.contains("cluster      none (a single node)"), "\(human.stdout)")
        #expect(lines.contains { $0.hasPrefix("storage      sqlite, writable in ") }, "\(human.stdout)")
        #expect(lines.contains("history      revisions 1..3 (3 changes, 235 B)") || lines.contains { $0.hasPrefix("history      revisions 1..3 (3 changes, ") },
                "\(human.stdout)")

        let json = try KVOClientProcess.run(server, ["status", "--json"])
        let reply = try JSONParser.parse(json.stdout.trimmingCharacters(in: .newlines))
        expectEqual(json.stdout.split(separator: "\n").count, 1)
        #expect(reply["ok"] == true && reply["rev"] == 3 && reply["objects"] == 1 && reply["id"] == nil, "\(json.stdout)")

        let digest = try KVOClientProcess.run(server, ["digest"])
        let words = digest.stdout.split(separator: " ")
        #expect(words.count == 5 && words[0].count == 64 && digest.stdout.hasSuffix(" rev 3 objects 1\n"), "\(digest.stdout)")
        let digestJSON = try JSONParser.parse(try KVOClientProcess.run(server, ["digest", "--json"]).stdout.trimmingCharacters(in: .newlines))
        expectEqual(digestJSON["digest"]?.stringValue, String(words[0]))

        let metrics = try KVOClientProcess.run(server, ["metrics", "kvod_requests_total"])
        expectEqual(metrics.status, 0)
        let metricLines = metrics.stdout.split(separator: "\n")
        #expect(!metricLines.isEmpty && metricLines.allSatisfy { $0.contains("kvod_requests_total") }, "\(metrics.stdout)")
        #expect(metricLines.contains { $0.hasPrefix(#"kvod_requests_total{op="set",outcome="ok"} 2"#) }, "\(metrics.stdout)")
        #expect(try KVOClientProcess.run(server, ["metrics"]).stdout.contains("kvod_build_info{"))
        expectEqual(server.stop(), 0)
    }

    @Test("kvoclient config lists each setting with its source; a non-admin gets forbidden (exit 1) from every one of these")
    func configAndRefusals() throws {
        let scratch = try TemporaryDirectory("cli-config")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "root", usersFile: usersFile)
        try KVODUserTool.addUser("bob", password: "bobs", rules: ["*=read,write"], usersFile: usersFile)
        let file = scratch.appending("kvod.conf")
        try ConfigurationFileTests.write("max-connections = 500\n", to: file)
        let server = try KVODProcess(["--users", usersFile, "--config", file], environment: ["KVOD_HISTORY": "1000"])
        let alice = ["KVOD_PASSWORD": "root"]
        let config = try KVOClientProcess.run(server, ["--user", "alice", "config"], environment: alice)
        expectEqual(config.status, 0, "\(config.stderr)")
        let lines = config.stdout.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
        #expect(lines.contains("max-connections 500 (file: \(file) line 1)"), "\(config.stdout)")
        #expect(lines.contains("history 1000 (environment: KVOD_HISTORY)"), "\(config.stdout)")
        #expect(lines.contains("users \(usersFile) (flag)"), "\(config.stdout)")
        #expect(lines.contains("max-line 1048576 (default)"), "\(config.stdout)")
        let json = try KVOClientProcess.run(server, ["--user", "alice", "config", "--json"], environment: alice)
        expectEqual(try JSONParser.parse(json.stdout.trimmingCharacters(in: .newlines))["settings"]?.arrayValue?.count, lines.count)
        // The users file's hashes are never shown (only its path).
        #expect(!config.stdout.contains("argon2") && !json.stdout.contains("argon2"))

        for command in [["status"], ["status", "--json"], ["config"], ["digest"], ["metrics"]] {
            let refused = try KVOClientProcess.run(server, ["--user", "bob"] + command, environment: ["KVOD_PASSWORD": "bobs"])
            #expect(refused.status == 1 && refused.stdout.isEmpty, "\(command): \(refused.stdout)\(refused.stderr)")
            #expect(refused.stderr.hasPrefix("kvoclient: error: forbidden: "), "\(command): \(refused.stderr)")
        }
        expectEqual(server.stop(), 0)
    }

    @Test("under --log-format json a usage or configuration error is one JSON line (exit 2 and 64); text otherwise as before")
    func jsonErrorLines() throws {
        let directory = try TemporaryDirectory("json-errors")
        let file = directory.appending("kvod.conf")
        try ConfigurationFileTests.write("log-format = json\nmax-conections = 5\n", to: file)
        let cases: [(arguments: [String], environment: [String: String], status: Int32, message: String)] = [
            (["--log-format", "json", "--bogus"], [:], 2, "Unknown option '--bogus'"),
            (["--log-format=json", "--max-line", "0"], [:], 2, "The value '0' is invalid for '--max-line"),
            (["--max-line", "-1"], ["KVOD_LOG_FORMAT": "json"], 2, "The value '-1' is invalid"),
            (["--config", directory.appending("absent.conf")], ["KVOD_LOG_FORMAT": "json"], 64, "cannot read the config file"),
            (["--log-format", "json", "--config", file], [:], 64, "unknown setting 'max-conections'"),
            (["--in-memory", "--log-format", "json"], ["KVOD_MAX_CONNECTIONS": "0"], 64, "(set in environment variable KVOD_MAX_CONNECTIONS)"),
        ]
        for (arguments, environment, status, message) in cases {
            let result = try ConfigurationFileTests.runKVOD(arguments, environment: environment)
            expectEqual(result.status, status, "\(arguments): \(result.stderr)")
            let lines = result.stderr.split(separator: "\n")
            expectEqual(lines.count, 1, "\(arguments): one line, not \(result.stderr)")
            let record = try #require(try? JSONParser.parse(String(lines.first ?? "")), "\(arguments): \(result.stderr)")
            #expect(record["level"] == "error" && record["label"] == "kvod" && record["exitCode"] == .string("\(status)"), "\(record)")
            expectEqual(record["message"]?.stringValue?.contains(message), true, "\(record)")
            expectEqual(record["timestamp"]?.stringValue?.hasSuffix("Z"), true)
            if status == 2 { #expect(record["usage"]?.stringValue?.contains("kvod") == true, "\(record)") }
        }
        // Without JSON, the same mistake is still the `kvod: error:` text line and the usage.
        let text = try ConfigurationFileTests.runKVOD(["--bogus"])
        #expect(text.status == 2 && text.stderr.hasPrefix("kvod: error: Unknown option '--bogus'\n"), "\(text.stderr)")
    }

    @Test("every numeric flag of kvod's shows its default in --help (or says it is off when not given)")
    func helpShowsDefaults() throws {
        let help = try CLIVersionAndHelpTests.runKVOD(["--help"])
        expectEqual(help.status, 0)
        let numeric = ["port", "tls-port", "tls-handshake-timeout", "http-port", "max-line", "max-output-buffer", "max-total-output",
                       "max-total-input", "first-request-timeout", "idle-timeout", "login-timeout", "max-value-bytes", "max-object-bytes", "max-memory",
                       "max-connections", "max-observations-per-connection", "max-pending-requests", "history", "history-bytes",
                       "wal-limit", "max-disk", "disk-reserve", "cluster-write-timeout", "cluster-snapshot-every", "cluster-checkpoint-every"]
        // Each option's entry: its line and the indented lines after it (a long label puts the help on the next line).
        var entries: [String: String] = [:]
        var current: String?
        for line in help.stdout.split(separator: "\n") {
            if line.hasPrefix("  --"), let name = line.dropFirst(4).split(separator: " ").first {
                current = String(name)
                entries[String(name)] = String(line)
            } else if let name = current, line.hasPrefix("      ") {
                entries[name, default: ""] += " " + line.trimmingCharacters(in: .whitespaces)
            } else {
                current = nil
            }
        }
        for name in numeric {
            let entry = try #require(entries[name], "--\(name) in \(help.stdout)")
            #expect(entry.contains("(default: ") || entry.contains("Off when not given"), "--\(name): \(entry)")
        }
        expectEqual(entries["max-line"]?.hasSuffix("(default: 1048576)"), true, "\(entries["max-line"] ?? "")")
        expectEqual(entries["port"]?.hasSuffix("(default: 7420)"), true, "\(entries["port"] ?? "")")
    }
}
