import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Every row of the operations table through the whole server (in-process, real TCP on loopback): the login
/// gate, admission of server-admin rows, and the metrics label each answer is counted under, for the rows as
/// declared, so that a new operation is walked without a line added here.
@Suite struct OperationTableOverServerTests {
    private static let password = "pw"

    @Test("before login only beforeLogin rows are answered; a writer is refused every server-admin row; each answer is counted under its row's label")
    func everyRowThroughTheServer() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("optable-\(getpid())-\(UInt64.random(in: 0...UInt64.max))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let usersFile = scratch.appendingPathComponent("users.json").path
        let hash = try PasswordHasher.hash(Self.password, cost: .minimal)
        try UsersFile.save(UserDirectory([
            UserRecord(name: "root", passwordHash: hash, rules: [try AccessRule(argument: "*=read,write,admin")]),
            UserRecord(name: "writer", passwordHash: hash, rules: [try AccessRule(argument: "*=read,write")]),
        ]), to: usersFile)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.usersFile = usersFile
        let running = try ServerThread(configuration)
        let port = running.port

        var expectedCounts: [MetricsOperation: UInt64] = [:]
        func line(_ operation: ProtocolOperation) -> [UInt8] {
            Array(operation.declaration.example.utf8) + [0x0A]
        }

        // Before login: every row but `auth` (its example's credentials are wrong, and failures close the
        // connection after five), on one connection.
        let anonymous = try LoopbackClient(port: port)
        for operation in ProtocolOperation.allCases where operation != .auth {
            try anonymous.send(raw: line(operation))
            let reply = try anonymous.readMessage()
            if operation.declaration.beforeLogin {
                expectEqual(reply["ok"], .bool(true), "\(operation.name) before login: \(reply)")
            } else {
                expectEqual(reply["error"]?["code"], .string("unauthenticated"), "\(operation.name) before login: \(reply)")
                expectEqual(reply["error"]?["message"], .string(RequestDecoder.loginRequired.message))
            }
            // Refused before login, a line is not even decoded: it is counted as `invalid`, not as its operation.
            let label = operation.declaration.beforeLogin ? operation.declaration.metrics : .invalid
            expectedCounts[label, default: 0] += 1
        }

        // A writer (read and write on everything, no admin): every server-admin row is forbidden by name.
        let writer = try LoopbackClient(port: port)
        try writer.call("auth", ["user": "writer", "password": .string(Self.password)])
        expectedCounts[.auth, default: 0] += 1
        for operation in ProtocolOperation.allCases where operation.declaration.requirement == .serverAdmin {
            try writer.send(raw: line(operation))
            let reply = try writer.readMessage()
            expectEqual(reply["error"]?["code"], .string("forbidden"), "\(operation.name) as writer: \(reply)")
            #expect(reply["error"]?["message"]?.stringValue?.hasPrefix("\(operation.name) needs 'admin' on every object") == true,
                    "\(reply)")
            expectedCounts[operation.declaration.metrics, default: 0] += 1
        }

        let server = try #require(running.stop(), "the server did not stop").server
        for (label, count) in expectedCounts {
            let counted = server.metrics.requests(label, outcome: "ok") + server.metrics.requests(label, outcome: "unauthenticated")
                + server.metrics.requests(label, outcome: "forbidden") + server.metrics.requests(label, outcome: "bad_request")
            expectEqual(counted, count, "\(label.name): counted \(counted), expected \(count)")
        }
    }
}
