import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Command-line arguments the built `kvoclient` and `kvod` must refuse as usage errors (exit 2, one
/// message saying what is wrong with which argument) before anything is sent or started: negative and
/// malformed numbers in every numeric option and argument, an empty `--host`, a missing value after
/// `--`.
@Suite("kvoclient and kvod arguments")
struct CLIArgumentTests {
    /// Checks a usage error: exit 2, `message` in the first stderr line, nothing on stdout.
    private func expectUsageError(_ result: KVOClientProcess.Result, _ message: String,
                                  sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(result.status == 2, "stderr: \(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.errorLines.first?.hasPrefix("kvoclient: error: ") == true, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.errorLines.first?.contains(message) == true, "\(result.stderr)", sourceLocation: sourceLocation)
        #expect(result.stdout.isEmpty, sourceLocation: sourceLocation)
    }

    @Test("every numeric option and argument of kvoclient says what is wrong with -1, not 'Missing value'")
    func negativeNumbersInKvoclient() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "t", "values": ["a": [1, 2, 3]]])
        let port = String(server.port)
        let cases: [(arguments: [String], message: String)] = [
            (["--port", "-1", "ping"], "The value '-1' is invalid for '--port <port>': must be 0 or more"),
            (["ping", "--port", "-1"], "The value '-1' is invalid for '--port <port>': must be 0 or more"),
            (["--port", "70000", "ping"], "'--port <port>': must be between 1 and 65535"),
            (["--port", "x", "ping"], "'--port <port>': must be a whole number, 0 or more"),
            (["--port", port, "insert", "t", "a", "9", "--index", "-1"], "'--index <index>': must be 0 or more"),
            (["--port", port, "insert", "t", "a", "9", "--indexes", "1,-2"], "--indexes '1,-2': index '-2' must be 0 or more"),
            (["--port", port, "subscribe", "t", "a", "--count", "-1"], "'--count <count>': must be 1 or more"),
            (["--port", port, "subscribe", "t", "a", "--heartbeat", "-1"], "'--heartbeat <heartbeat>': must be 0 or more"),
            (["--port", port, "remove", "t", "a", "-1"], "index '-1' must be 0 or more"),
            (["--port", port, "remove", "t", "a", "0", "one"], "index 'one' must be a whole number, 0 or more"),
            (["--port", port, "replace", "t", "a", "-1", "9"], "index '-1' must be 0 or more"),
            (["--port", port, "unbind", "-1"], "binding id '-1' must be 0 or more"),
            (["--port", port, "unbind"], "Missing expected argument '<id>'"),
        ]
        for (arguments, message) in cases {
            expectUsageError(try KVOClientProcess.run(arguments), message)
        }
        // Nothing reached the server.
        expectEqual(try server.connect().call("get", ["object": "t"])["value"], ["a": [1, 2, 3]])
        // The accepted forms still work.
        expectSuccess(try KVOClientProcess.run(server, ["remove", "t", "a", "0"]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["unbind", "7"]), lines: ["not bound"])
    }

    @Test("--host '' is a usage error (exit 2), not a connection failure (exit 3)")
    func emptyHost() throws {
        expectUsageError(try KVOClientProcess.run(["--host", "", "ping"]), "--host must not be empty")
        expectUsageError(try KVOClientProcess.run(["ping", "--host", ""]), "--host must not be empty")
    }

    @Test("`set t m --` is a missing value (exit 2), not the string \"--\"; `set t m -- --` stores \"--\"")
    func terminatorWithoutValue() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "t"])
        expectUsageError(try KVOClientProcess.run(server, ["set", "t", "m", "--"]), "Missing expected argument '<value>'")
        expectUsageError(try KVOClientProcess.run(server, ["insert", "t", "m", "--"]), "Missing expected argument '<value>'")
        expectUsageError(try KVOClientProcess.run(server, ["replace", "t", "m", "--"]), "expected pairs of an index and a value")
        expectEqual(try server.connect().call("get", ["object": "t"])["value"], [:])
        expectSuccess(try KVOClientProcess.run(server, ["set", "t", "m", "--", "--"]), lines: ["rev 2"])
        expectEqual(try server.connect().call("get", ["object": "t", "keyPath": "m"])["value"], "--")
    }

    @Test("kvod's numeric flags, --host and --unix say what is wrong, exit 2", arguments: [
        (["--port", "-1"], "The value '-1' is invalid for '--port <port>': must be 0 or more"),
        (["--port", "65536"], "'--port <port>': must be between 0 and 65535"),
        (["--max-connections", "-1"], "'--max-connections <max-connections>': must be 1 or more"),
        (["--max-line", "0"], "'--max-line <max-line>': must be 1 or more"),
        (["--max-output-buffer", "-5"], "'--max-output-buffer <max-output-buffer>': must be 1 or more"),
        (["--history", "-1"], "'--history <history>': must be 0 or more"),
        (["--history-bytes", "-1"], "'--history-bytes <history-bytes>': must be 0 or more"),
        (["--history", "many"], "'--history <history>': must be a whole number, 0 or more"),
        (["--host", ""], "--host must not be empty"),
        (["--unix", ""], "--unix takes a path of 1 to 107 bytes"),
        (["--unix", "/tmp/" + String(repeating: "s", count: 103)], "--unix takes a path of 1 to 107 bytes"),
        (["--unix-mode", "0600"], "--unix-mode needs --unix"),
        (["--unix", "/tmp/kvod-mode.sock", "--unix-mode", "0800"], "--unix-mode must be octal permission bits"),
        (["--unix", "/tmp/kvod-mode.sock", "--unix-mode", "rw"], "--unix-mode must be octal permission bits"),
        (["--unix", "/tmp/kvod-mode.sock", "--unix-mode", "01777"], "--unix-mode must be octal permission bits"),
    ])
    func kvodFlags(arguments: [String], message: String) throws {
        let error = #expect(throws: KVODProcessError.self) { _ = try KVODProcess(arguments) }
        guard case let .exitedEarly(status, log) = error else { return }
        expectEqual(status, 2, "\(log)")
        #expect(log.hasPrefix("kvod: error: "), "\(log)")
        #expect(log.contains(message), "\(log)")
    }
}

/// Value arguments that look like JSON but are not valid JSON by kvod's rules, and arguments that are
/// not UTF-8: usage errors naming the argument, never stored as a different string.
@Suite("kvoclient value arguments")
struct CLIValueArgumentTests {
    @Test("a value that looks like JSON but does not parse (1e400, '[1e400]', '{\"a\":') is a usage error; nothing is stored")
    func invalidJSONLookingValues() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "t", "values": ["list": [0]]])
        let cases: [(arguments: [String], message: String)] = [
            (["set", "t", "n", "1e400"], "the value '1e400' is a number out of range"),
            (["set", "t", "n", "--", "-1e400"], "the value '-1e400' is a number out of range"),
            (["set", "t", "n", "[1e400]"], "the value '[1e400]' looks like JSON but is not valid JSON (number out of range"),
            (["set", "t", "n", #"{"a":"#], #"the value '{"a":' looks like JSON but is not valid JSON"#),
            (["set", "t", "n", #""open"#], #"the value '"open' looks like JSON but is not valid JSON"#),
            (["insert", "t", "list", "1", "1e999"], "the value '1e999' is a number out of range"),
            (["replace", "t", "list", "0", "[1e400]"], "the value '[1e400]' looks like JSON"),
            (["create", "u", #"{"a":1e400}"#], #"values must be a JSON object, such as '{"date":"2026-11-20"}': '{"a":1e400}' is not valid JSON (number out of range"#),
        ]
        for (arguments, message) in cases {
            let result = try KVOClientProcess.run(server, arguments)
            expectEqual(result.status, 2, "\(arguments): \(result.stderr)")
            expectEqual(result.errorLines.first?.contains("kvoclient: error: " + message), true, "\(arguments): \(result.stderr)")
        }
        expectEqual(try server.connect().call("get", ["object": "t"])["value"], ["list": [0]])
        expectEqual(try server.connect().call("list")["objects"], ["t"])
        // Text that does not look like JSON is still a string, and valid JSON is JSON.
        expectSuccess(try KVOClientProcess.run(server, ["set", "t", "d", "2026-11-21"]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["set", "t", "z", "01"]), lines: ["rev 3"])
        expectSuccess(try KVOClientProcess.run(server, ["set", "t", "n", "1e300"]), lines: ["rev 4"])
        let value = try server.connect().call("get", ["object": "t"])["value"]
        expectEqual(value?["d"], "2026-11-21")
        expectEqual(value?["z"], "01")
        expectEqual(value?["n"], .double(1e300))
    }

    @Test("an argument that is not valid UTF-8 is a usage error naming it, not U+FFFD")
    func nonUTF8Argument() throws {
        let server = try KVODProcess()
        try server.connect().call("create", ["object": "t"])
        // Foundation's Process takes Swift strings: the shell makes the raw bytes.
        for (script, position, shown) in [
            (#"exec "$0" --port "$1" set t n "$(printf 'a\377b')""#, 6, #"a\xFFb"#),
            (#"exec "$0" --port "$1" set t "$(printf 'k\300')" 1"#, 5, #"k\xC0"#),
            (#"exec "$0" --port "$1" create "$(printf '\355\240\200')""#, 4, #"\xED\xA0\x80"#),
        ] {
            let shell = Process()
            shell.executableURL = URL(fileURLWithPath: "/bin/sh")
            shell.arguments = ["-c", script, BuiltProducts.executable("kvoclient").path, String(server.port)]
            let errors = Pipe()
            shell.standardError = errors
            shell.standardOutput = FileHandle.nullDevice
            try shell.run()
            let stderr = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            shell.waitUntilExit()
            expectEqual(shell.terminationStatus, 2, "\(stderr)")
            #expect(stderr.hasPrefix("kvoclient: error: argument \(position) is not valid UTF-8: '\(shown)'"), "\(stderr)")
        }
        expectEqual(try server.connect().call("get", ["object": "t"])["value"], [:])
        expectEqual(try server.connect().call("list")["objects"], ["t"])
    }
}
