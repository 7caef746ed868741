import KVOWireProbe
import KVOJSON
#if canImport(Glibc)
import Glibc
#endif

/// `kvod-bench websocket`: fan-out deliveries per second with WebSocket subscribers (`--http-port`, `/ws`)
/// against plaintext TCP subscribers, one kvod, the same run and harness (`ThreadedFanOut`): S subscribers
/// observe one key path with options new, one TCP publisher pipelines sets of B-byte string values. Each
/// subscriber upgrades with a raw HTTP request and sends its `observe` as one masked text frame; its reader
/// counts frames. Issue 14's target: WebSocket at least 0.8x TCP at S = 100, B = 64.
///
///     kvod-bench websocket [--subscribers 100] [--bytes 64] [--seconds 5] [--runs 1]
enum WebSocketBenchmark {
    static func main(arguments: [String]) -> Never {
        let options = IntegerFlags.parse(arguments, usage: "kvod-bench websocket [--subscribers N] [--bytes N] [--seconds N] [--runs N]")
        let subscribers = options["subscribers"] ?? 100
        let bytes = options["bytes"] ?? 64
        let seconds = Double(options["seconds"] ?? 5)
        let runs = options["runs"] ?? 1
        ChildProcesses.installInterruptHandler()
        let server = start()

        print("#### WebSocket: fan-out against TCP (kvod-bench websocket)")
        print("")
        print("| run | subscribers | bytes | transport | deliveries/s | ratio | kvod CPU (cores) | deliveries per kvod CPU-second | ratio |")
        print("| ---: | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
        for run in 1...max(1, runs) {
            let tcp = ThreadedFanOut.run(publisherPort: server.port, serverPID: server.pid, object: "tcp\(run)",
                                         subscribers: subscribers, bytes: bytes, seconds: seconds) { object in
                (observingOverTCP(object, port: server.port), .line)
            }
            let tcpPerCPU = tcp.perSecond / max(tcp.serverCores, 0.01)
            print("| \(run) | \(subscribers) | \(bytes) | TCP | \(Int(tcp.perSecond)) | 1.00 | \(format2(tcp.serverCores)) | \(Int(tcpPerCPU)) | 1.00 |")
            let ws = ThreadedFanOut.run(publisherPort: server.port, serverPID: server.pid, object: "ws\(run)",
                                        subscribers: subscribers, bytes: bytes, seconds: seconds) { object in
                (observingOverWebSocket(object, port: server.httpPort), .webSocketFrame)
            }
            let wsPerCPU = ws.perSecond / max(ws.serverCores, 0.01)
            print("| \(run) | \(subscribers) | \(bytes) | WebSocket | \(Int(ws.perSecond)) | \(format2(ws.perSecond / tcp.perSecond)) | "
                + "\(format2(ws.serverCores)) | \(Int(wsPerCPU)) | \(format2(wsPerCPU / tcpPerCPU)) |")
        }
        kill(server.pid, SIGTERM)
        _ = ChildProcesses.wait(server.pid, seconds: 10)
        exit(0)
    }

    private static func connect(_ port: Int) -> KVOConnection {
        do {
            return try KVOConnection(host: "127.0.0.1", port: port)
        } catch {
            fail("connect to 127.0.0.1:\(port): \(error)")
        }
    }

    private static func observingOverTCP(_ object: String, port: Int) -> KVOConnection {
        let connection = connect(port)
        do {
            try connection.call("observe", ["object": .string(object), "keyPath": "v", "options": ["new"]])
        } catch {
            fail("observe: \(error)")
        }
        return connection
    }

    /// A WebSocket subscriber: the upgrade, then `observe` in one masked frame, then its reply frame.
    private static func observingOverWebSocket(_ object: String, port: Int) -> KVOConnection {
        let connection = connect(port)
        let upgrade = "GET /ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        let request = Array(#"{"op":"observe","object":"\#(object)","keyPath":"v","options":["new"]}"#.utf8)
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        var frame: [UInt8] = [0x81, 0x80 | UInt8(request.count)] + mask
        frame += request.enumerated().map { $0.element ^ mask[$0.offset % 4] }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        do {
            try connection.send(raw: Array(upgrade.utf8) + frame)
            // The 101 response, then the reply frame (`{"ok":true,...}`, under 126 bytes).
            while true {
                let count = try buffer.withUnsafeMutableBytes { try connection.receiveRaw(into: $0) }
                guard count > 0 else { fail("the WebSocket subscriber was closed during set-up") }
                received += buffer[0..<count]
                if let end = headerEnd(received), received.count >= end + 2, received.count >= end + 2 + Int(received[end + 1] & 0x7F) {
                    guard received.starts(with: Array("HTTP/1.1 101".utf8)) else { fail("upgrade refused: \(String(decoding: received, as: UTF8.self))") }
                    let reply = received[(end + 2)...]
                    guard reply.starts(with: Array(#"{"ok":true"#.utf8)) else { fail("observe over WebSocket: \(String(decoding: reply, as: UTF8.self))") }
                    break
                }
            }
        } catch {
            fail("WebSocket subscriber: \(error)")
        }
        return connection
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4) where bytes[index] == 0x0D && bytes[index + 1] == 0x0A && bytes[index + 2] == 0x0D && bytes[index + 3] == 0x0A {
            return index + 4
        }
        return nil
    }

    /// kvod in memory with a plaintext and an HTTP listener; the ports from its two stdout lines.
    private static func start() -> (pid: pid_t, port: Int, httpPort: Int) {
        let (pid, ports) = ListeningKVOD.start(["--port", "0", "--http-port", "0", "--in-memory", "--max-connections", "5000"],
                                               listeners: 2)
        return (pid, ports[0], ports[1])
    }

    private static func format2(_ value: Double) -> String {
        let hundredths = Int((value * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)"
    }
}
