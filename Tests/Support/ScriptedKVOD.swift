import Foundation
import Glibc
import KVOJSON

/// A stand-in for kvod on 127.0.0.1 that speaks just enough of the protocol to test what a client makes
/// of lines the real kvod does not send (a newer server's codes, say): it answers every request with
/// `ok` (`hello` granting compact events, `observe` with `sub` 1 at `rev` 1) and, right after the first
/// `observe` reply, writes `events`, each line as given. One connection; it stays open until deinit.
/// One thread accepts and serves; the test's thread only reads `port`.
final class ScriptedKVOD: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let events: [String]

    init(events: [String]) throws {
        self.events = events
        (listener, port) = try LoopbackListener.open(backlog: 1)
        Thread.detachNewThread { [self] in serve() }
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func serve() {
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return }
        defer { close(connection) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        var observed = false
        while true {
            let count = recv(connection, &buffer, buffer.count, 0)
            if count <= 0 { return }
            pending.append(contentsOf: buffer[..<count])
            while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                let line = Array(pending[..<newline])
                pending.removeSubrange(...newline)
                guard let request = try? JSONParser.parse(line), let id = request["id"] else { continue }
                var reply: [String: JSONValue] = ["id": id, "ok": true]
                switch request["op"]?.stringValue {
                case "hello": reply.merge(["server": "kvod", "version": "0", "protocol": 1, "connection": 1, "events": "compact"]) { $1 }
                case "observe": reply.merge(["sub": 1, "rev": 1]) { $1 }
                default: break
                }
                var output = JSONWriter.bytes(.object(reply)) + [UInt8(ascii: "\n")]
                if request["op"] == "observe" && !observed {
                    observed = true
                    for event in events { output += Array(event.utf8) + [UInt8(ascii: "\n")] }
                }
                _ = output.withUnsafeBytes { send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
        }
    }
}
