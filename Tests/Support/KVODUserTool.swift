import Foundation

/// Runs the built `kvod user …` command (offline user management) to completion, with the password
/// in KVOD_PASSWORD (never on the command line) and standard input not a terminal.
enum KVODUserTool {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// `kvod user <arguments>` with KVOD_PASSWORD set to `password` (unset when nil).
    @discardableResult
    static func run(_ arguments: [String], password: String? = nil, environment extra: [String: String] = [:]) throws -> Result {
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "KVOD_PASSWORD")
        if let password { environment["KVOD_PASSWORD"] = password }
        environment.merge(extra) { $1 }
        return try runKVOD(["user"] + arguments, environment: environment)
    }

    /// The built `kvod` with `arguments` and `environment`, run to completion, standard input not a terminal.
    static func runKVOD(_ arguments: [String], environment: [String: String]) throws -> Result {
        let process = Process()
        process.executableURL = BuiltProducts.executable("kvod")
        process.arguments = arguments
        process.environment = environment
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(status: process.terminationStatus, stdout: String(decoding: out, as: UTF8.self),
                      stderr: String(decoding: err, as: UTF8.self))
    }

    /// Adds a user with the cheapest hash (tests only) to a users file, failing the test if it fails.
    static func addUser(_ name: String, password: String, rules: [String] = ["*=read,write,admin"], usersFile: String) throws {
        let result = try run(["add", "--users", usersFile, "--hash-cost", "minimal", name] + rules, password: password)
        guard result.status == 0 else { throw KVODUserToolError.failed(result.stderr) }
    }
}

enum KVODUserToolError: Error {
    case failed(String)
}
