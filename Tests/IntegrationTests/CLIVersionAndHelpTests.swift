import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Issue 27, run as the real binaries: `kvod --version` and `kvoclient --version` print the version the
/// server answers in `hello` (one source of truth), kvod's first `listening` log line carries it, every help text of kvod
/// and kvoclient reads without stray runs of spaces inside its sentences, and every `kvod user` error has
/// kvod's `<program>: error:` style.
@Suite("version, help texts and error style")
struct CLIVersionAndHelpTests {
    /// What a finished `kvod …` did.
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    /// Runs the built `kvod` with `arguments` to completion, with `COLUMNS` wide enough that ArgumentParser
    /// wraps no help line (a run of spaces at a wrap would be hidden in the line break).
    static func runKVOD(_ arguments: [String]) throws -> Result {
        let result = try KVODUserTool.runKVOD(arguments, environment: ProcessInfo.processInfo.environment.merging(["COLUMNS": "10000"]) { $1 })
        return Result(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    static func runKVOClient(_ arguments: [String]) throws -> Result {
        let result = try KVOClientProcess.run(arguments, environment: ["COLUMNS": "10000"])
        return Result(status: result.status, stdout: result.stdout, stderr: result.stderr)
    }

    @Test("kvod --version and kvoclient --version print the version hello answers (with the commit when the build knows it); kvod logs both as it starts listening")
    func versions() throws {
        let server = try KVODProcess()
        let hello = try server.connect().call("hello")
        let version = try #require(hello["version"]?.stringValue)
        #expect(!version.isEmpty)
        let kvod = try Self.runKVOD(["--version"])
        expectEqual(kvod.status, 0, "\(kvod.stderr)")
        let client = try Self.runKVOClient(["--version"])
        expectEqual(client.status, 0, "\(client.stderr)")
        // kvod's first "listening" log line says which kvod it is (version and commit); a refusal at start-up
        // stays one line.
        let listening = server.log.split(separator: "\n").first { $0.contains("] listening") }
        expectEqual(listening?.contains("version=\(version)"), true, "\(server.log)")
        // The commit: 40 hex digits from a git checkout, "unknown" from a build without .git. kvod --version
        // says `0.1.0 (abc1234)`, or only the version when the commit is unknown.
        let field = listening?.split(separator: " ").first { $0.hasPrefix("commit=") }
        let commit = try #require(field.map { String($0.dropFirst("commit=".count)) }, "\(server.log)")
        let isHex = commit.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
        #expect(commit == "unknown" || (commit.utf8.count == 40 && isHex), "\(commit)")
        let expected = commit == "unknown" ? version : "\(version) (\(commit.prefix(7)))"
        expectEqual(kvod.stdout, expected + "\n", "\(kvod.stdout)")
        // kvoclient says the same (issue 42): the commit it was built from, which is kvod's in one build.
        expectEqual(client.stdout, expected + "\n", "\(client.stdout)")
        expectEqual(listening?.contains("pid=\(server.process.processIdentifier)"), true, "\(server.log)")
    }

    /// Runs of two or more spaces inside the sentences of a help screen: each option's or subcommand's help
    /// (the text after its label column) and the overview and discussion, outside `backquoted` examples
    /// (which show output whose fields are two spaces apart). ArgumentParser's own layout (the indentation
    /// and the padding between a label and its help) does not count.
    static func strayRuns(in help: String) -> [String] {
        var found: [String] = []
        var section = ""
        for rawLine in help.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = String(rawLine)
            if let first = line.first, first != " " {
                section = line  // "OVERVIEW: …", "USAGE: …", "OPTIONS:", "SUBCOMMANDS:", "ARGUMENTS:"
            }
            var text = line.drop { $0 == " " }
            let isLabelSection = section.hasPrefix("OPTIONS") || section.hasPrefix("ARGUMENTS")
                || section.hasPrefix("SUBCOMMANDS")
            let indentation = line.count - text.count
            if isLabelSection, indentation < 26, let gap = text.range(of: "  ") {
                // "--host <host>           Address to listen on.": the help starts after the padding.
                text = text[gap.upperBound...].drop { $0 == " " }
            }
            let outsideBackquotes = text.split(separator: "`", omittingEmptySubsequences: false).enumerated()
                .filter { $0.offset % 2 == 0 }.map { String($0.element) }
            for piece in outsideBackquotes where piece.trimmingCharacters(in: .whitespaces).contains("  ") {
                found.append(line)
                break
            }
        }
        return found
    }

    @Test("the stray-run check finds a run inside a sentence and passes the layout and backquoted examples")
    func strayRunCheckItself() {
        let help = """
            OVERVIEW: Observe key paths.

            One line per event: `a.b  valueChanged  rev=2`, for example.

            OPTIONS:
              --host <host>           Address to listen on.
              --a-very-long-option-name-here <file>
                                      With users, clients must         authenticate.
              --insecure-open         Serve without authentication.
            """
        let stray = Self.strayRuns(in: help)
        #expect(stray.count == 1 && stray.first?.contains("must         authenticate") == true, "\(stray)")
        expectEqual(Self.strayRuns(in: "OVERVIEW: Two  spaces.").count, 1)
    }

    /// kvoclient's subcommands, from its help's SUBCOMMANDS section (and `user`'s own).
    static func subcommands(in help: String) -> [String] {
        var names: [String] = []
        var inSection = false
        for line in help.split(separator: "\n") {
            if line.hasPrefix("SUBCOMMANDS") { inSection = true; continue }
            if let first = line.first, first != " " { inSection = false }
            guard inSection, line.hasPrefix("  "), line.dropFirst(2).first != " ", !line.hasPrefix("  See '") else { continue }
            if let name = line.split(separator: " ").first, name != "help" { names.append(String(name)) }
        }
        return names
    }

    @Test("no help text of kvod or kvoclient has a stray run of spaces inside a sentence")
    func helpTextsHaveNoStrayRuns() throws {
        var screens: [(String, Result)] = []
        screens.append(("kvod --help", try Self.runKVOD(["--help"])))
        let userHelp = try Self.runKVOD(["user", "--help"])
        screens.append(("kvod user --help", userHelp))
        for name in Self.subcommands(in: userHelp.stdout) {
            screens.append(("kvod user \(name) --help", try Self.runKVOD(["user", name, "--help"])))
        }
        let clientHelp = try Self.runKVOClient(["--help"])
        screens.append(("kvoclient --help", clientHelp))
        let clientCommands = Self.subcommands(in: clientHelp.stdout)
        #expect(clientCommands.contains("subscribe") && clientCommands.contains("user"), "\(clientHelp.stdout)")
        for name in clientCommands {
            let help = try Self.runKVOClient([name, "--help"])
            screens.append(("kvoclient \(name) --help", help))
            if name == "user" {
                for nested in Self.subcommands(in: help.stdout) {
                    screens.append(("kvoclient user \(nested) --help", try Self.runKVOClient(["user", nested, "--help"])))
                }
            }
        }
        #expect(screens.count > 20)
        for (command, result) in screens {
            expectEqual(result.status, 0, "\(command): \(result.stderr)")
            #expect(result.stdout.contains("USAGE:"), "\(command): \(result.stdout)")
            let stray = Self.strayRuns(in: result.stdout)
            #expect(stray.isEmpty, "\(command) has runs of spaces inside a sentence:\n\(stray.joined(separator: "\n"))")
        }
    }

    @Test("every kvod user error starts with kvod user: error:, usage errors (exit 2) and failures (exit 1) alike")
    func userErrorsHaveOneStyle() throws {
        let scratch = try TemporaryDirectory("user-errors")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "pw", usersFile: usersFile)
        let failures: [([String], Int32)] = [
            (["remove", "--users", usersFile, "nobody"], 1),
            (["add", "--users", usersFile, "--hash-cost", "minimal", "alice"], 1),
            (["token", "list", "--users", usersFile, "nobody"], 1),
            (["bogus"], 2),
            (["list", "--users", usersFile, "--data", scratch.appending("data")], 2),
        ]
        for (arguments, status) in failures {
            let result = try KVODUserTool.run(arguments, password: "pw")
            expectEqual(result.status, status, "\(arguments): \(result.stderr)")
            #expect(result.stderr.hasPrefix("kvod user: error: "), "\(arguments): \(result.stderr)")
            #expect(!result.stderr.contains("Error: "), "\(arguments): \(result.stderr)")
        }
        // kvod's own usage errors keep their style.
        let kvod = try Self.runKVOD(["--bogus"])
        expectEqual(kvod.status, 2)
        #expect(kvod.stderr.hasPrefix("kvod: error: "), "\(kvod.stderr)")
    }
}
