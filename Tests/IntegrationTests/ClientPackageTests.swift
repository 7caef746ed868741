import Foundation
import Testing

@testable import KVOTestSupport

/// Issue 29, item 7: an app that depends on the client library builds it and nothing of the server. An outside
/// package, written as README.md's "Use KVOClient in your package" says, is built against this checkout's
/// `client/` manifest with `swift build`; nothing may be fetched (no package dependencies), no server module
/// or dependency may be compiled, and the built program must talk to a real kvod (an `@Observable` model
/// beside KVOClient in one file, a `withObservation`); the same program with the object and key path given in the
/// old unlabelled order must not compile.
@Suite(.timeLimit(.minutes(10))) struct ClientPackageTests {
    /// The repository's root: this file is Tests/IntegrationTests/ClientPackageTests.swift.
    private static let repositoryRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private static func manifest(clientPath: String) -> String {
        """
        // swift-tools-version:6.1
        import PackageDescription

        let package = Package(
            name: "forecast",
            platforms: [.macOS(.v14)],
            dependencies: [
                .package(path: "\(clientPath)"),
            ],
            targets: [
                .executableTarget(name: "forecast", dependencies: [.product(name: "KVOClient", package: "client")]),
            ]
        )
        """
    }

    private static let program = """
        import KVOClient
        import Observation

        @Observable final class Forecast {
            var city = ""
        }

        let port = Int(CommandLine.arguments[1])!
        let kvod = try await KVOClient.connect(to: .init(host: "127.0.0.1", port: port))
        try await kvod.create("forecast", values: ["city": "Paris"] as JSONValue)
        let model = Forecast()
        try await kvod.withObservation("city", of: "forecast", options: [.initial, .new], as: String.self) { changes in
            for try await change in changes {
                model.city = change.new ?? ""
                break
            }
        }
        print("city \\(model.city)")
        kvod.close()

        """

    /// Runs `executable` with `arguments` in `directory`; returns its exit status and its output (stdout and
    /// stderr together). The waiting happens on a thread of its own: a `swift build` takes seconds, and a
    /// cooperative thread blocked that long starves the other tests' tasks (two such threads on this machine:
    /// a client test's 2-second request timeout was seen to fire after 13.7 s).
    private static func run(_ executable: String, _ arguments: [String], in directory: URL) async throws -> (status: Int32, output: String) {
        try await withCheckedThrowingContinuation { continuation in
            let thread = Thread {
                continuation.resume(with: Result { try runBlocking(executable, arguments, in: directory) })
            }
            thread.start()
        }
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], in directory: URL) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [executable] + arguments
        process.currentDirectoryURL = directory
        let output = ChildPipe()
        process.standardOutput = output.fileHandleForWriting
        process.standardError = output.fileHandleForWriting
        try process.run()
        output.closeWritingEnd()
        let collector = PipeCollector(reading: output.fileHandleForReading)
        process.waitUntilExit()
        collector.waitForEnd(timeout: 10)
        return (process.terminationStatus, String(decoding: collector.bytes, as: UTF8.self))
    }

    @Test("an outside package depending on client/ builds KVOClient alone, fetching nothing, and its program talks to kvod")
    func outsidePackageBuildsTheClientAlone() async throws {
        let directory = URL(fileURLWithPath: NSTemporaryDirectory())
            .appendingPathComponent("kvod-client-package-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("Sources/forecast"),
                                                withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let clientPath = Self.repositoryRoot.appendingPathComponent("client").path
        try Self.manifest(clientPath: clientPath).write(to: directory.appendingPathComponent("Package.swift"),
                                                        atomically: true, encoding: .utf8)
        try Self.program.write(to: directory.appendingPathComponent("Sources/forecast/main.swift"),
                               atomically: true, encoding: .utf8)

        let build = try await Self.run("swift", ["build", "--disable-automatic-resolution", "-v"], in: directory)
        expectEqual(build.status, 0, "swift build failed:\n\(build.output.suffix(4_000))")
        guard build.status == 0 else { return }

        // Nothing fetched: no package dependency to resolve, so no checkouts and no pins.
        let checkouts = directory.appendingPathComponent(".build/checkouts").path
        let fetched = (try? FileManager.default.contentsOfDirectory(atPath: checkouts)) ?? []
        #expect(fetched.isEmpty, "fetched \(fetched)")
        let resolved = (try? String(contentsOf: directory.appendingPathComponent("Package.resolved"), encoding: .utf8)) ?? ""
        #expect(!resolved.contains("\"identity\""), "Package.resolved pins something:\n\(resolved)")
        // Compiled: the client's modules and the program, nothing of the server or its dependencies.
        for module in ["KVOClient", "KVOJSON", "forecast"] {
            #expect(build.output.contains("-module-name \(module) "), "\(module) was not compiled")
        }
        for module in ["KVOServer", "KVOEngine", "KVOModel", "ArgumentParser", "Logging", "GenerateManual"] {
            #expect(!build.output.contains("-module-name \(module) "), "\(module) was compiled for a client-only package")
        }

        let server = try KVODProcess()
        let program = directory.appendingPathComponent(".build/debug/forecast").path
        let result = try await Self.run(program, [String(server.port)], in: directory)
        expectEqual(result.status, 0, "forecast failed:\n\(result.output)")
        #expect(result.output.contains("city Paris"), "\(result.output)")

        // Item 6: the object and the key path, both strings, cannot be swapped unnoticed. The old unlabelled
        // order no longer compiles, and the compiler names the label to add.
        let swapped = Self.program.replacingOccurrences(
            of: "kvod.close()", with: "_ = try await kvod.set(\"forecast\", \"city\", to: \"Oslo\")\nkvod.close()")
        try swapped.write(to: directory.appendingPathComponent("Sources/forecast/main.swift"), atomically: true, encoding: .utf8)
        let refused = try await Self.run("swift", ["build", "--disable-automatic-resolution"], in: directory)
        #expect(refused.status != 0, "the unlabelled (object, keyPath) order compiled")
        #expect(refused.output.contains("of:"), "\(refused.output.suffix(2_000))")
    }
}
