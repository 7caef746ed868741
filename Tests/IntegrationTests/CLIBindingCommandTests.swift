import Foundation
import KVOJSON
import Testing

@testable import KVOTestSupport

/// The built `kvoclient`'s class and binding commands (define-class, classes, create --class, bind,
/// combine, unbind, bindings): usage errors found before connecting, and the commands against a real
/// kvod.
@Suite("kvoclient class and binding usage errors")
struct CLIBindingUsageErrorTests {
    /// Nothing listens on port 1: a command that got as far as connecting would exit 3, not 2.
    private static let unusedPort = ["--port", "1"]

    @Test("an endpoint that is not OBJECT:KEYPATH is a usage error", arguments: [
        (["bind", "ab", "c:d"], "The value 'ab' is invalid for '<source>': expected OBJECT:KEYPATH, such as 'a:x'"),
        (["bind", ":x", "c:d"], "The value ':x' is invalid for '<source>': the object before ':' is empty"),
        (["bind", "a:x", "c:"], "The value 'c:' is invalid for '<target>': the key path after ':' is empty"),
        (["bind", "a:x", ":"], "The value ':' is invalid for '<target>': the object before ':' is empty"),
        (["combine", "--source", "a:x", "--source", "b", "--to", "c:z", "--reduce", "$0"],
         "The value 'b' is invalid for '--source <object:keyPath>': expected OBJECT:KEYPATH, such as 'a:x'"),
        (["combine", "--source", "a:x", "--to", "c", "--reduce", "$0"],
         "The value 'c' is invalid for '--to <object:keyPath>': expected OBJECT:KEYPATH, such as 'a:x'"),
    ])
    func badEndpoints(arguments: [String], message: String) throws {
        let result = try KVOClientProcess.run(Self.unusedPort + arguments)
        expectEqual(result.status, 2)
        #expect(result.stdout.isEmpty)
        expectEqual(result.errorLines.first, "kvoclient: error: " + message, "\(result.stderr)")
    }

    @Test("the object and key path split at the first ':', so only a bad TARGET is reported")
    func endpointsSplitAtTheFirstColon() throws {
        // "a:b:c" is object "a", key path "b:c" (accepted); "c" is not an endpoint.
        let result = try KVOClientProcess.run(Self.unusedPort + ["bind", "a:b:c", "c"])
        expectEqual(result.status, 2)
        #expect(result.errorLines.first?.hasPrefix("kvoclient: error: The value 'c' is invalid for '<target>'") == true,
                "\(result.stderr)")
    }

    @Test("combine needs --reduce, --to and at least one --source", arguments: [
        (["combine", "--source", "a:x", "--to", "c:z"], "Missing expected argument '--reduce <expr>'"),
        (["combine", "--source", "a:x", "--reduce", "$0"], "Missing expected argument '--to <object:keyPath>'"),
        (["combine", "--to", "c:z", "--reduce", "$0"], "give at least one --source OBJECT:KEYPATH"),
    ])
    func combineRequirements(arguments: [String], message: String) throws {
        let result = try KVOClientProcess.run(Self.unusedPort + arguments)
        expectEqual(result.status, 2)
        #expect(result.stdout.isEmpty)
        expectEqual(result.errorLines.first, "kvoclient: error: " + message, "\(result.stderr)")
    }

    @Test("define-class refuses a file that is not a JSON object, before connecting", arguments: [
        ("[1,2]", "must be a JSON object, but it holds a JSON array"),
        (#""LabColor""#, "must be a JSON object, but it holds a JSON string"),
        (#"{"name": "#, "is not valid JSON: "),
        ("", "is not valid JSON: "),
    ])
    func defineClassNeedsAJSONObject(contents: String, problem: String) throws {
        let directory = try TemporaryDirectory("cli-class")
        let path = directory.appending("class.json")
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        let result = try KVOClientProcess.run(Self.unusedPort + ["define-class", path])
        expectEqual(result.status, 2)
        #expect(result.stdout.isEmpty)
        // One line, no usage text: the arguments were fine, the file is not.
        expectEqual(result.errorLines.count, 1, "\(result.stderr)")
        #expect(result.errorLines.first?.hasPrefix("kvoclient: error: the class definition in '\(path)' \(problem)") == true,
                "\(result.stderr)")
    }

    @Test("define-class with a missing file, or with an empty standard input, is a usage error")
    func defineClassMissingFileAndEmptyStandardInput() throws {
        let directory = try TemporaryDirectory("cli-class")
        let missing = directory.appending("missing.json")
        let result = try KVOClientProcess.run(Self.unusedPort + ["define-class", missing])
        expectEqual(result.status, 2)
        #expect(result.stdout.isEmpty)
        expectEqual(result.errorLines, ["kvoclient: error: cannot read the class definition file '\(missing)': No such file or directory"])
        // The test runs kvoclient with /dev/null as standard input.
        let stdin = try KVOClientProcess.run(Self.unusedPort + ["define-class", "-"])
        expectEqual(stdin.status, 2)
        #expect(stdin.errorLines.first?.hasPrefix("kvoclient: error: the class definition in standard input is not valid JSON") == true,
                "\(stdin.stderr)")
    }

    @Test("unbind needs a numeric id")
    func unbindNeedsANumber() throws {
        let result = try KVOClientProcess.run(Self.unusedPort + ["unbind", "seven"])
        expectEqual(result.status, 2)
        expectEqual(result.errorLines.first, "kvoclient: error: binding id 'seven' must be a whole number, 0 or more", "\(result.stderr)")
    }
}

/// The class and binding commands against a real kvod, with the exact output of each. The binding ids
/// assume a fresh server hands out 1, 2, ... in order.
@Suite("kvoclient class and binding commands")
struct CLIBindingCommandTests {
    private static let labColor = #"{"name":"LabColor","properties":{"L":{"type":"number","min":0,"max":100}}}"#

    @Test("define-class from a file, classes (plain and --json), create --class and its invalid_value error")
    func classes() throws {
        let server = try KVODProcess()
        let directory = try TemporaryDirectory("cli-class")
        let path = directory.appending("lab.json")
        try Data(Self.labColor.utf8).write(to: URL(fileURLWithPath: path))
        expectSuccess(try KVOClientProcess.run(server, ["define-class", path]), lines: ["defined LabColor"])

        let listed = try KVOClientProcess.run(server, ["classes"])
        expectEqual(listed.status, 0, "\(listed.stderr)")
        expectEqual(listed.lines.count, 1)
        let definition = try JSONParser.parse(listed.lines.first ?? "")
        expectEqual(definition["name"], "LabColor")
        expectEqual(definition["properties"]?["L"]?["max"], 100)
        // One line of compact JSON with sorted keys: the writer's own encoding of it.
        expectEqual(listed.lines.first, JSONWriter.string(definition))

        let whole = try KVOClientProcess.run(server, ["classes", "--json"])
        expectEqual(whole.status, 0, "\(whole.stderr)")
        expectEqual(whole.lines.count, 1)
        let reply = try JSONParser.parse(whole.lines.first ?? "")
        expectEqual(reply["ok"], true)
        expectEqual(reply["classes"], [definition])

        expectSuccess(try KVOClientProcess.run(server, ["create", "lab", #"{"L":50}"#, "--class", "LabColor"]), lines: ["rev 1"])
        let refused = try KVOClientProcess.run(server, ["create", "hot", #"{"L":120}"#, "--class", "LabColor"])
        expectEqual(refused.status, 1)
        #expect(refused.stdout.isEmpty)
        expectEqual(refused.errorLines.count, 1, "\(refused.stderr)")
        expectEqual(refused.errorLines.first?.hasPrefix("kvoclient: error: invalid_value: "), true, "\(refused.stderr)")
        expectEqual(refused.errorLines.first?.hasSuffix(" (property 'L', rule 'max')"), true, "\(refused.stderr)")
        expectSuccess(try KVOClientProcess.run(server, ["list"]), lines: ["lab"])
    }

    @Test("bind with --filter, --convert and --now, bindings, and unbind twice")
    func bindAndUnbind() throws {
        let server = try KVODProcess()
        expectSuccess(try KVOClientProcess.run(server, ["create", "a", #"{"x":3}"#]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "b", #"{"y":0}"#]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, [
            "bind", "a:x", "b:y", "--filter", "$value > 0", "--convert", "$value * 2", "--now",
        ]), lines: ["binding 1"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "b", "y"]), lines: ["6"])
        expectEqual(try KVOClientProcess.run(server, ["set", "a", "x", "5"]).status, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "b", "y"]), lines: ["10"])
        // The filter keeps a non-positive value from being written.
        expectEqual(try KVOClientProcess.run(server, ["set", "a", "x", "-1"]).status, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "b", "y"]), lines: ["10"])

        expectSuccess(try KVOClientProcess.run(server, ["bindings"]),
                      lines: ["1  a:x -> b:y  filter $value > 0  convert $value * 2"])
        let json = try KVOClientProcess.run(server, ["bindings", "--json"])
        expectEqual(json.status, 0, "\(json.stderr)")
        expectEqual(json.lines.count, 1)
        let binding = try JSONParser.parse(json.lines.first ?? "")
        expectEqual(binding["binding"], 1)
        expectEqual(binding["kind"], "bind")
        expectEqual(binding["from"], ["object": "a", "keyPath": "x"])
        expectEqual(binding["to"], ["object": "b", "keyPath": "y"])
        expectEqual(json.lines.first, JSONWriter.string(binding))

        expectSuccess(try KVOClientProcess.run(server, ["unbind", "1"]), lines: ["removed"])
        expectSuccess(try KVOClientProcess.run(server, ["unbind", "1"]), lines: ["not bound"])
        expectSuccess(try KVOClientProcess.run(server, ["bindings"]), lines: [])
        expectEqual(try KVOClientProcess.run(server, ["set", "a", "x", "7"]).status, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "b", "y"]), lines: ["10"])
    }

    @Test("combine several sources with --reduce and --now, listed by bindings after a bind")
    func combine() throws {
        let server = try KVODProcess()
        expectSuccess(try KVOClientProcess.run(server, ["create", "a", #"{"x":1}"#]), lines: ["rev 1"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "b", #"{"y":2}"#]), lines: ["rev 2"])
        expectSuccess(try KVOClientProcess.run(server, ["create", "c", #"{"z":0}"#]), lines: ["rev 3"])
        expectSuccess(try KVOClientProcess.run(server, ["bind", "a:x", "c:copy"]), lines: ["binding 1"])
        expectSuccess(try KVOClientProcess.run(server, [
            "combine", "--source", "a:x", "--source", "b:y", "--to", "c:z", "--reduce", "$0 + $1", "--now",
        ]), lines: ["binding 2"])
        expectSuccess(try KVOClientProcess.run(server, ["get", "c", "z"]), lines: ["3"])
        expectEqual(try KVOClientProcess.run(server, ["set", "b", "y", "40"]).status, 0)
        expectSuccess(try KVOClientProcess.run(server, ["get", "c", "z"]), lines: ["41"])
        expectSuccess(try KVOClientProcess.run(server, ["bindings"]), lines: [
            "1  a:x -> c:copy",
            "2  combineLatest(a:x, b:y) -> c:z  reduce $0 + $1",
        ])
        expectSuccess(try KVOClientProcess.run(server, ["unbind", "2"]), lines: ["removed"])
        expectSuccess(try KVOClientProcess.run(server, ["bindings"]), lines: ["1  a:x -> c:copy"])
    }
}
