import Foundation
import KVOJSON
import KVOWireProbe
import Testing

@testable import KVOTestSupport

/// Issue 27, over the real kvod: `--config FILE` and `KVOD_<FLAG>` environment variables set every flag, flags
/// over environment over file; a bad file is one `kvod: error:` line naming the file, line and setting (exit 64);
/// SIGHUP re-reads the file, applies live limits and the log level, warns about what needs a restart, and keeps
/// the running configuration when the file has become invalid; `--log-format json` writes one JSON object a line.
@Suite("config file, environment, SIGHUP reload and JSON logs")
struct ConfigurationFileTests {
    /// `kvod arguments…` run to completion with `environment` added to the test's (no `KVOD_` variable of the
    /// test's own leaks in).
    static func runKVOD(_ arguments: [String], environment: [String: String] = [:]) throws -> KVODUserTool.Result {
        var base = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("KVOD_") }
        base.merge(environment) { $1 }
        return try KVODUserTool.runKVOD(arguments, environment: base)
    }

    static func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    /// Opens connections until one is refused; returns the limit the refusal names ("at its limit of N"). A
    /// refused connection's first line is the refusal (no id), an admitted one's the reply to its ping.
    static func connectionLimit(of server: KVODProcess) throws -> Int? {
        var open: [KVOConnection] = []
        for _ in 0..<10 {
            let client = try server.connect()
            try client.send(["op": "ping", "id": 1])
            let first = try client.readMessage(timeout: 5)
            if first["ok"] == true {
                open.append(client)
                continue
            }
            let message = first["error"]?["message"]?.stringValue ?? ""
            guard let range = message.range(of: "limit of ") else { return nil }
            return Int(message[range.upperBound...].prefix { $0.isNumber })
        }
        return nil
    }

    @Test("flags win over KVOD_ variables, which win over the file")
    func precedence() throws {
        let directory = try TemporaryDirectory("config")
        let file = directory.appending("kvod.conf")
        try Self.write("# limits\nmax-connections = 1\n", to: file)
        let fromFile = try KVODProcess(["--config", file])
        expectEqual(try Self.connectionLimit(of: fromFile), 1, "\(fromFile.log)")
        let fromEnvironment = try KVODProcess(["--config", file], environment: ["KVOD_MAX_CONNECTIONS": "2"])
        expectEqual(try Self.connectionLimit(of: fromEnvironment), 2, "\(fromEnvironment.log)")
        let fromFlag = try KVODProcess(["--config", file, "--max-connections", "3"], environment: ["KVOD_MAX_CONNECTIONS": "2"])
        expectEqual(try Self.connectionLimit(of: fromFlag), 3, "\(fromFlag.log)")
        // KVOD_CONFIG names the file too; a list from the environment replaces the file's.
        try Self.write("in-memory = true\nhttp-port = 0\nhttp-allowed-host = [\"a.example\", \"b.example\"]\n", to: file)
        let check = try Self.runKVOD(["--check-config"], environment: ["KVOD_CONFIG": file, "KVOD_HTTP_ALLOWED_HOST": "c.example,d.example"])
        expectEqual(check.status, 0, "\(check.stderr)")
        #expect(check.stdout.contains("http-allowed-host = c.example, d.example  (environment variable KVOD_HTTP_ALLOWED_HOST)"), "\(check.stdout)")
        #expect(check.stdout.contains("in-memory = true  (\(file) line 1)"), "\(check.stdout)")
    }

    /// Every option of kvod's, read from ArgumentParser's own dump, is accepted in a file and in the environment:
    /// never an unknown setting, and either checked as given or refused naming where it was set.
    @Test("every flag of kvod's can be set in a config file and by a KVOD_ variable")
    func everyFlagIsSettable() throws {
        let dump = try Self.runKVOD(["--experimental-dump-help"])
        let json = try #require(try JSONSerialization.jsonObject(with: Data(dump.stdout.utf8)) as? [String: Any])
        let arguments = try #require((json["command"] as? [String: Any])?["arguments"] as? [[String: Any]])
        let directory = try TemporaryDirectory("config")
        let file = directory.appending("kvod.conf")
        var checked = 0
        for argument in arguments {
            guard let name = (argument["preferredName"] as? [String: Any])?["name"] as? String,
                  !["help", "version", "experimental-dump-help", "config", "check-config"].contains(name)
            else { continue }
            let value = argument["kind"] as? String == "flag" ? "true" : "1"
            let variable = "KVOD_" + name.uppercased().replacingOccurrences(of: "-", with: "_")
            try Self.write("\(name) = \(value)\n", to: file)
            for (result, source) in [
                (try Self.runKVOD(["--config", file, "--check-config"]), "\(file) line 1"),
                (try Self.runKVOD(["--check-config"], environment: [variable: value]), "environment variable \(variable)"),
            ] {
                #expect(!result.stderr.contains("unknown setting"), "\(name): \(result.stderr)")
                let accepted = result.status == 0 && result.stdout.contains("\(name) = \(value)  (\(source))")
                let refusedNamingIt = result.status == 64 && result.stderr.hasPrefix("kvod: error: ")
                    && result.stderr.contains("--\(name)") && result.stderr.contains("(set in \(source)")
                #expect(accepted || refusedNamingIt, "\(name) from \(source): status \(result.status)\n\(result.stdout)\(result.stderr)")
            }
            checked += 1
        }
        #expect(checked >= 40, "only \(checked) options in kvod's help dump")
    }

    @Test("a bad config file is one kvod: error: line naming the file, line and setting; exit 64")
    func badFiles() throws {
        let directory = try TemporaryDirectory("config")
        let file = directory.appending("kvod.conf")
        let cases: [(text: String, expected: [String])] = [
            ("in-memory = true\nmax-conections = 5\n", ["\(file) line 2: unknown setting 'max-conections' (did you mean 'max-connections'?)"]),
            ("in-memory = true\n\nmax-connections = lots\n", ["The value 'lots' is invalid for '--max-connections", "(set in \(file) line 3)"]),
            ("in-memory = maybe\n", ["\(file) line 1: in-memory: is a flag: true or false, not 'maybe'"]),
            ("max-line = [1, 2]\n", ["\(file) line 1: max-line: takes one value, not a list"]),
            ("max-line = 10\nmax-line = 20\n", ["\(file) line 2: max-line: set twice (first on line 1)"]),
            ("max-line 10\n", ["\(file) line 1: expected 'name = value'"]),
            ("host = \"unterminated\n", ["\(file) line 1: host: unterminated string"]),
            ("in-memory = true\ntls-cert = /x.pem\n", ["--tls-port", "(set in \(file) line 2)"]),
        ]
        for (text, expected) in cases {
            try Self.write(text, to: file)
            let result = try Self.runKVOD(["--config", file])
            expectEqual(result.status, 64, "\(text): \(result.stderr)")
            #expect(result.stderr.hasPrefix("kvod: error: ") && result.stderr.split(separator: "\n").count == 1, "\(result.stderr)")
            for part in expected { #expect(result.stderr.contains(part), "\(text): \(result.stderr)") }
        }
        let missing = try Self.runKVOD(["--config", directory.appending("absent.conf")])
        expectEqual(missing.status, 64)
        expectEqual(missing.stderr, "kvod: error: cannot read the config file '\(directory.appending("absent.conf"))': No such file or directory\n")
        let badVariable = try Self.runKVOD(["--in-memory"], environment: ["KVOD_MAX_CONNECTIONS": "0"])
        expectEqual(badVariable.status, 64)
        #expect(badVariable.stderr.contains("(set in environment variable KVOD_MAX_CONNECTIONS)"), "\(badVariable.stderr)")
        // The command line's own mistakes keep their usage error (exit 2); --help is not blocked by a bad file.
        expectEqual(try Self.runKVOD(["--config", file, "--help"]).status, 0)
    }

    @Test("SIGHUP applies a new connection limit and log level, warns about what needs a restart, and keeps all on a bad file")
    func sighupReload() throws {
        let directory = try TemporaryDirectory("config")
        let file = directory.appending("kvod.conf")
        try Self.write("max-connections = 1\nlog-level = info\nhistory = 100\n", to: file)
        let server = try KVODProcess(["--config", file], logLevel: "")
        expectEqual(try Self.connectionLimit(of: server), 1)
        #expect(!server.log.contains("connection opened"), "debug lines at info level")

        try Self.write("max-connections = 3\nlog-level = debug\nhistory = 200\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("config reload: max-connections 1 -> 3"), "\(server.log)")
        #expect(server.log.contains("config reload: log-level info -> debug"), "\(server.log)")
        #expect(server.log.contains("config reload: history cannot change while kvod runs: keeping 100 until a restart"), "\(server.log)")
        expectEqual(try Self.connectionLimit(of: server), 3, "\(server.log)")
        #expect(server.waitForLog("connection opened"), "the new log level applies")

        try Self.write("max-connections = 1\nlog-level = info\nmax-conections = 2\n", to: file)
        server.send(signal: SIGHUP)
        #expect(server.waitForLog("configuration reload failed, keeping the running configuration: \(file) line 3: unknown setting"), "\(server.log)")
        expectEqual(try Self.connectionLimit(of: server), 3, "\(server.log)")
        expectEqual(server.stop(), 0)
    }

    @Test("--log-format json writes every record as one JSON object a line, client text escaped")
    func jsonLogs() throws {
        let server = try KVODProcess(["--log-format", "json"], logLevel: "debug")
        let client = try server.connect()
        let evil = "evil\nroot: forged\u{1B}[31m"
        try client.call("create", ["object": .string(evil), "values": ["v": 1]])
        try client.call("create", ["object": "target", "values": ["w": 0]])
        try client.call("bind", ["from": ["object": .string(evil), "keyPath": "v"], "to": ["object": "target", "keyPath": "w"]])
        try client.call("delete", ["object": .string(evil)])
        #expect(server.waitForLog("removed: sourceDeleted"), "\(server.log)")
        expectEqual(server.stop(), 0)
        let lines = server.log.split(separator: "\n")
        #expect(lines.count >= 4, "\(server.log)")
        #expect(!server.log.utf8.contains(0x1B), "raw ESC in the log")
        var levels = Set<String>()
        for line in lines {
            let record = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any], "\(line)")
            let timestamp = try #require(record["timestamp"] as? String)
            #expect(timestamp.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(timestamp)")
            expectEqual(record["label"] as? String, "kvod")
            #expect(record["message"] is String)
            levels.insert(try #require(record["level"] as? String))
        }
        #expect(levels.isSuperset(of: ["info", "debug"]), "\(levels)")
        let listening = try #require(lines.lazy.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .first { $0["message"] as? String == "listening" })
        expectEqual(listening["address"] as? String, "127.0.0.1:\(server.port)", "metadata as fields: \(listening)")
        let removed = try #require(lines.first { $0.contains("removed: sourceDeleted") })
        let message = try #require((try JSONSerialization.jsonObject(with: Data(removed.utf8)) as? [String: Any])?["message"] as? String)
        #expect(message.contains("evil") && !message.contains("\n"), "\(message)")
    }
}
