import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Bad input, framing, limits, slow consumers and shutdown, against the real kvod over TCP.
@Suite struct ServerRobustnessTests {
    private func errorCode(_ reply: JSONValue) -> String? {
        reply["error"]?["code"]?.stringValue
    }

    /// Creates `o` = {"v": 1}, observed by a second connection, and returns both connections.
    private func seeded(_ server: KVODProcess) throws -> (client: KVOConnection, observer: KVOConnection) {
        let client = try server.connect()
        let observer = try server.connect()
        try client.call("create", ["object": "o", "values": ["v": 1]])
        try observer.call("observe", ["object": "o", "keyPath": "v", "options": ["new"]])
        return (client, observer)
    }

    /// Drains events until the server closes the connection (true) or 10 s pass quietly (false).
    private func readsUntilClosed(_ connection: KVOConnection) -> Bool {
        while true {
            let result = Result { () throws(KVOClientError) -> JSONValue? in try connection.nextEvent(timeout: 10) }
            switch result {
            case .success(.some): continue
            case .success(.none): return false
            case let .failure(error): return error == .connectionClosed
            }
        }
    }

    // MARK: - Bad input

    @Test func everyKindOfBadLineGetsAnErrorAndChangesNothing() throws {
        let server = try KVODProcess()
        let (client, observer) = try seeded(server)
        let badLines: [(bytes: [UInt8], code: String)] = [
            (Array("this is not json".utf8), "bad_request"),
            (Array("{\"op\":\"set\"".utf8), "bad_request"),  // truncated
            (Array("[1,2,3]".utf8), "bad_request"),
            (Array("\"just a string\"".utf8), "bad_request"),
            (Array("42".utf8), "bad_request"),
            ([0x7B, 0x22, 0x6F, 0x70, 0x22, 0x3A, 0x22, 0xFF, 0xFE, 0x22, 0x7D], "bad_request"),  // {"op":"\xff\xfe"}
            ([0xC0, 0xAF], "bad_request"),  // overlong UTF-8
            (Array(#"{"id":1}"#.utf8), "bad_request"),  // no op
            (Array(#"{"op":7}"#.utf8), "bad_request"),
            (Array(#"{"op":"teleport"}"#.utf8), "unknown_op"),
            (Array(#"{"op":"set","object":"o","keyPath":"v"}"#.utf8), "bad_request"),  // no value
            (Array(#"{"op":"set","object":"o","value":5}"#.utf8), "bad_request"),  // no keyPath
            (Array(#"{"op":"set","object":5,"keyPath":"v","value":5}"#.utf8), "bad_request"),
            (Array(#"{"op":"set","object":"o","keyPath":"v..w","value":5}"#.utf8), "bad_request"),
            (Array(#"{"op":"set","object":"o","keyPath":"","value":5}"#.utf8), "bad_request"),
            (Array(#"{"op":"create","object":"n","values":[1]}"#.utf8), "bad_request"),
            (Array(#"{"op":"create","object":""}"#.utf8), "bad_request"),
            (Array(#"{"op":"observe","object":"o","keyPath":"v","options":["sometimes"]}"#.utf8), "bad_request"),
            (Array(#"{"op":"observe","object":"o","keyPath":"v","options":"new"}"#.utf8), "bad_request"),
            (Array(#"{"op":"unobserve","sub":"1"}"#.utf8), "bad_request"),
            (Array(#"{"op":"unobserve"}"#.utf8), "bad_request"),
            (Array(#"{"op":"get","object":"o","keyPath":7}"#.utf8), "bad_request"),
            (Array(#"{"op":"ping","id":{"nested":true}}"#.utf8), "bad_request"),
            (Array(String(repeating: "[", count: 100_000).utf8), "bad_request"),  // deep nesting: no stack overflow
        ]
        for bad in badLines {
            try client.send(raw: bad.bytes + [0x0A])
            let reply = try client.readMessage()
            expectEqual(reply["ok"], false, "\(String(decoding: bad.bytes, as: UTF8.self))")
            expectEqual(errorCode(reply), bad.code, "\(String(decoding: bad.bytes, as: UTF8.self)) -> \(reply)")
            expectEqual(reply["error"]?["message"]?.stringValue?.isEmpty, false)
        }
        // Nothing changed, nobody was notified, and the connection still serves.
        expectEqual(try client.call("get", ["object": "o"])["value"], ["v": 1])
        expectEqual(try client.call("get", ["object": "o"])["rev"], 1)
        expectEqual(try client.call("list")["objects"], ["o"])
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty)
        try client.call("set", ["object": "o", "keyPath": "v", "value": 2])
        expectEqual(try observer.nextEvent(timeout: 5)?["change"]?["new"], 2)
    }

    @Test func emptyLinesAreIgnoredAndCRLFIsAccepted() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        try client.send(raw: Array("\n\r\n   \n{\"op\":\"ping\",\"id\":1}\r\n\n{\"op\":\"ping\",\"id\":2}\n".utf8))
        expectEqual(try client.readMessage()["id"], 1)
        expectEqual(try client.readMessage()["id"], 2)
        try client.send(.object(["op": "ping", "id": 3]))
        expectEqual(try client.readMessage()["id"], 3, "no reply was produced for the empty lines")
    }

    @Test func aRequestSplitOverManyWritesAndManyRequestsInOneWrite() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let request = Array(#"{"op":"create","id":"split","object":"s","values":{"text":"héllo wörld"}}"#.utf8) + [0x0A]
        for byte in request {
            try client.send(raw: [byte])
            usleep(200)
        }
        let reply = try client.readMessage()
        #expect(reply["id"] == "split" && reply["ok"] == true)
        expectEqual(try client.call("get", ["object": "s", "keyPath": "text"])["value"], "héllo wörld")

        var batch: [UInt8] = []
        for index in 0..<2000 {
            batch += JSONWriter.bytes(["op": "set", "id": .int(Int64(index)), "object": "s", "keyPath": "n",
                                       "value": .int(Int64(index))]) + [0x0A]
        }
        try client.send(raw: batch)
        for index in 0..<2000 {
            let reply = try client.readMessage()
            expectEqual(reply["id"], .int(Int64(index)), "replies come in request order")
            expectEqual(reply["ok"], true)
        }
        expectEqual(try client.call("get", ["object": "s", "keyPath": "n"])["value"], 1999)
    }

    @Test func anOversizedLineIsRefusedWithoutKillingTheConnection() throws {
        let server = try KVODProcess(["--max-line", "1024"])
        let (client, observer) = try seeded(server)
        // A set whose line is far over the limit, sent in pieces: too_large, and the set does not happen.
        let huge = Array(#"{"op":"set","id":"big","object":"o","keyPath":"v","value":""#.utf8)
            + [UInt8](repeating: UInt8(ascii: "x"), count: 200_000) + Array("\"}\n".utf8)
        for start in stride(from: 0, to: huge.count, by: 16_384) {
            try client.send(raw: Array(huge[start..<min(start + 16_384, huge.count)]))
        }
        let reply = try client.readMessage()
        expectEqual(errorCode(reply), "too_large")
        expectEqual(try client.call("get", ["object": "o", "keyPath": "v"])["value"], 1)
        // A line just under the limit is fine.
        let fits = String(repeating: "y", count: 900)
        expectEqual(try client.call("set", ["object": "o", "keyPath": "v", "value": .string(fits)])["ok"], true)
        expectEqual(try observer.nextEvent(timeout: 5)?["change"]?["new"], .string(fits))
        try observer.call("ping")
        #expect(observer.pendingEvents.isEmpty, "the refused set notified nobody")
    }

    // MARK: - Slow consumers and limits

    @Test func aClientThatNeverReadsDoesNotSlowOthers() throws {
        let server = try KVODProcess()
        let writer = try server.connect()
        try writer.call("create", ["object": "hot", "values": ["v": 0]])
        // The sluggard subscribes and then never reads again.
        let sluggard = try server.connect()
        try sluggard.call("observe", ["object": "hot", "keyPath": "v", "options": ["new", "old"]])
        let bystander = try server.connect()
        try bystander.call("create", ["object": "calm", "values": ["v": 0]])
        try bystander.call("observe", ["object": "calm", "keyPath": "v"])

        // 20,000 changes, pipelined in batches; read the writer's replies as we go.
        let padding = String(repeating: "p", count: 200)
        var batch: [UInt8] = []
        for index in 1...20_000 {
            batch += JSONWriter.bytes(["op": "set", "object": "hot", "keyPath": "v",
                                       "value": .string("\(index)-\(padding)")]) + [0x0A]
            if index % 1000 == 0 {
                try writer.send(raw: batch)
                batch.removeAll(keepingCapacity: true)
                for _ in 0..<1000 { _ = try writer.readMessage() }
                // Meanwhile another client is served promptly.
                let started = Date()
                try bystander.call("set", ["object": "calm", "keyPath": "v", "value": .int(Int64(index))])
                expectEqual(try bystander.nextEvent(timeout: 1)?["change"]?["new"], .int(Int64(index)))
                #expect(Date().timeIntervalSince(started) < 1.0)
            }
        }
        expectEqual(try writer.call("get", ["object": "hot", "keyPath": "v"])["value"], .string("20000-\(padding)"))
        expectEqual(try bystander.call("ping")["ok"], true)
        // The sluggard's queue (about 5 MB) stayed under the default 32 MiB limit: it is still
        // connected and still gets everything, in order, once it reads.
        for index in 1...20_000 {
            let event = try #require(try sluggard.nextEvent(timeout: 10))
            expectEqual(event["change"]?["new"], .string("\(index)-\(padding)"))
            if event["change"]?["new"] != .string("\(index)-\(padding)") { break }
        }
    }

    @Test func aConsumerPastTheOutputLimitIsClosedAndOthersCarryOn() throws {
        let server = try KVODProcess(["--max-output-buffer", "262144"])
        let writer = try server.connect()
        try writer.call("create", ["object": "hot", "values": ["v": 0]])
        let sluggard = try server.connect()
        try sluggard.call("observe", ["object": "hot", "keyPath": "v", "options": ["new", "old"]])
        let healthy = try server.connect()
        try healthy.call("observe", ["object": "hot", "keyPath": "v", "options": ["new"]])
        let big = String(repeating: "z", count: 8_000)
        // ~16 KB per event to the sluggard: the kernel buffers fill, then the 256 KiB limit trips.
        for index in 1...400 {
            try writer.call("set", ["object": "hot", "keyPath": "v", "value": .string("\(index)\(big)")])
            let event = try #require(try healthy.nextEvent(timeout: 5))
            expectEqual(event["change"]?["new"], .string("\(index)\(big)"))
        }
        #expect(server.waitForLog("output buffer limit exceeded"), "the reason is logged: \(server.log)")
        // Its subscription is gone (info from another connection), and reading finds the end.
        let observers = try writer.call("info", ["object": "hot"])["observers"]?.arrayValue ?? []
        expectEqual(observers.count, 1)
        #expect(readsUntilClosed(sluggard))
        expectEqual(try healthy.call("ping")["ok"], true)
    }

    @Test func connectionsOverTheLimitAreToldAndClosed() throws {
        let server = try KVODProcess(["--max-connections", "2"])
        let first = try server.connect()
        let second = try server.connect()
        try first.call("ping")
        try second.call("ping")
        let third = try server.connect()
        let refusal = try third.readMessage()
        expectEqual(errorCode(refusal), "too_many_connections")
        #expect(throws: KVOClientError.connectionClosed) { _ = try third.readMessage(timeout: 5) }
        #expect(server.waitForLog("too_many_connections") || server.waitForLog("rejected"))
        // The two admitted connections are unaffected; once one leaves, a newcomer gets in.
        try first.call("ping")
        second.close()
        let deadline = Date().addingTimeInterval(5)
        var admitted = false
        while Date() < deadline, !admitted {
            let newcomer = try server.connect()
            admitted = (try? newcomer.call("ping", timeout: 2)) != nil
            if !admitted { usleep(20_000) }
        }
        #expect(admitted)
    }

    // MARK: - Shutdown

    @Test(arguments: [SIGTERM, SIGINT])
    func aSignalClosesEveryHandleAndExitsZero(signal: Int32) throws {
        let server = try KVODProcess()
        let (client, observer) = try seeded(server)
        // Leave output queued, a partial line and open subscriptions behind.
        try client.send(raw: Array(#"{"op":"set","object":"o","ke"#.utf8))
        _ = observer
        let status = server.stop(signal: signal)
        expectEqual(status, 0, "kvod log:\n\(server.log)")
        #expect(server.log.contains("event loop closed cleanly"), "uv_loop_close returned 0:\n\(server.log)")
        #expect(throws: KVOClientError.self) { _ = try client.readMessage(timeout: 5) }
    }

    @Test func aRefusedConnectionIsAClearError() throws {
        let server = try KVODProcess()
        let port = server.port
        server.stop()
        #expect(throws: KVOClientError.self) {
            _ = try KVOConnection(host: "127.0.0.1", port: port)
        }
        do {
            _ = try KVOConnection(host: "127.0.0.1", port: port)
        } catch {
            #expect("\(error)".contains("127.0.0.1:\(port)"))
        }
    }
}
