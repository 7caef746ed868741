#if canImport(Glibc)
import Glibc
#endif

/// Where the server executables are.
struct Executables {
    /// kvod: by default the `kvod` next to this `kvod-bench` (both in `.build/release` after
    /// `swift build -c release`).
    var kvod: String
    /// redis-server: by default looked up on the `PATH`.
    var redis: String
    /// perf, for `--perf`.
    var perf = "perf"
    /// Words put before kvod's command line (`kvod-bench callgrind`: valgrind and its options); empty
    /// for a plain kvod.
    var kvodWrapper: [String] = []

    static func defaults() -> Executables {
        var path = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &path, path.count - 1)
        let own = length > 0 ? String(decoding: path[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "kvod-bench"
        let directory = own.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        return Executables(kvod: directory.isEmpty ? "kvod" : directory + "/kvod", redis: "redis-server")
    }
}

/// How a kvod under test keeps its state.
enum KVODStorage: Equatable {
    case inMemory
    /// `--data <temporary directory> --sync <mode>` (mode: off, normal or full).
    case durable(sync: String)
    /// `--in-memory --users <temporary file>` with one user, `bench`, whose rules are `globs` globs (the
    /// last one matching the benchmark's object): every connection authenticates first.
    case inMemoryWithUser(globs: Int)

    var label: String {
        switch self {
        case .inMemory: return "in-memory"
        case .durable(let sync): return "--sync \(sync)"
        case .inMemoryWithUser(let globs): return "in-memory, a user with \(globs) glob rules"
        }
    }

    /// The user and password connections must `auth` with (nil: open mode).
    var credentials: (user: String, password: String)? {
        guard case .inMemoryWithUser = self else { return nil }
        return ("bench", "bench-password")
    }

    /// The bench user's rules: `count - 1` globs that do not match the benchmark's object `bench` (half
    /// prefix globs, half suffix globs), then `bench*`, which does.
    static func benchRules(count: Int) -> [String] {
        (0..<max(count - 1, 0)).map { $0 % 2 == 0 ? "zone-\($0)-*=read,write" : "*-zone-\($0)=read,write" }
            + ["bench*=read,write"]
    }
}

/// Which server a run measures.
enum ServerKind: Equatable {
    case kvod(KVODStorage)
    case redis

    var wire: Wire {
        if case .redis = self { return .redis }
        return .kvod
    }

    var label: String {
        switch self {
        case .kvod(.inMemory): return "kvod"
        case .kvod(let storage): return "kvod \(storage.label)"
        case .redis: return "redis"
        }
    }
}

/// A kvod or redis-server process started for one benchmark run on its own loopback port, and stopped
/// (SIGTERM, then SIGKILL after 10 s) by `stop()`.
///
/// kvod: `kvod --host 127.0.0.1 --port 0 --log-level warning` plus `--in-memory` or `--data <tmp> --sync
/// <mode>`; the port is read from its first stdout line, `kvod listening on HOST:PORT`. Its warnings (a
/// slow consumer closed, for instance) go to this process's standard error.
/// redis-server: `--bind 127.0.0.1 --port <free port> --save '' --appendonly no`, logging to a temporary
/// file that is printed if it fails to start.
final class ServerProcess {
    let kind: ServerKind
    let pid: pid_t
    let port: UInt16
    private let dataDirectory: String?
    private let logFile: String?
    private var running = true

    var wire: Wire { kind.wire }

    private init(kind: ServerKind, pid: pid_t, port: UInt16, dataDirectory: String?, logFile: String?) {
        self.kind = kind
        self.pid = pid
        self.port = port
        self.dataDirectory = dataDirectory
        self.logFile = logFile
    }

    /// Starts a server and waits until it accepts connections; exits the benchmark if it cannot.
    /// `maxConnections` raises the server's connection limit when a run needs more than its default.
    static func start(_ kind: ServerKind, executables: Executables, maxConnections: Int? = nil) -> ServerProcess {
        switch kind {
        case .kvod(let storage):
            return startKVOD(storage, executable: executables.kvod, wrapper: executables.kvodWrapper, maxConnections: maxConnections)
        case .redis: return startRedis(executable: executables.redis, maxConnections: maxConnections)
        }
    }

    /// CPU time (user + system) the server has used so far, in seconds.
    var cpuSeconds: Double { ProcessStats.cpuSeconds(pid: pid) }

    /// The server's resident memory now, in bytes.
    var residentBytes: Int { ProcessStats.residentBytes(pid: pid) }

    /// True while the process has not exited.
    var isRunning: Bool {
        guard running else { return false }
        var status: Int32 = 0
        if waitpid(pid, &status, WNOHANG) == pid {
            running = false
            ChildProcesses.forget(pid)
        }
        return running
    }

    /// Stops the server and removes its temporary files.
    func stop() {
        if isRunning {
            kill(pid, SIGTERM)
            // 60 s: a kvod under callgrind writes its profile on the way out.
            if !ChildProcesses.wait(pid, seconds: 60) {
                printError("kvod-bench: \(kind.label) (pid \(pid)) ignored SIGTERM for 60 s; killing it\n")
                kill(pid, SIGKILL)
                _ = ChildProcesses.wait(pid, seconds: 10)
            }
            running = false
        }
        if let dataDirectory { removeTree(dataDirectory) }
        if let logFile { unlink(logFile) }
    }

    // MARK: kvod

    private static func startKVOD(_ storage: KVODStorage, executable: String, wrapper: [String],
                                  maxConnections: Int?) -> ServerProcess {
        // No idle timeout: a benchmark's subscribers only read, and their raw parsers expect no heartbeat lines (a
        // read still stamps its connection, so the request path measured is kvod's as deployed).
        var arguments = [executable, "--host", "127.0.0.1", "--port", "0", "--log-level", "warning", "--idle-timeout", "0"]
        var dataDirectory: String?
        switch storage {
        case .inMemory:
            arguments.append("--in-memory")
        case .durable(let sync):
            let directory = makeTemporaryDirectory()
            dataDirectory = directory
            arguments += ["--data", directory, "--sync", sync]
        case .inMemoryWithUser(let globs):
            let directory = makeTemporaryDirectory()
            dataDirectory = directory
            let usersFile = directory + "/users.json"
            let credentials = storage.credentials!
            setenv("KVOD_PASSWORD", credentials.password, 1)
            let adder = ChildProcesses.spawn([executable, "user", "add", "--users", usersFile, "--hash-cost", "minimal",
                                              credentials.user] + KVODStorage.benchRules(count: globs), standardOutput: nil)
            unsetenv("KVOD_PASSWORD")
            guard ChildProcesses.wait(adder, seconds: 30) else { fail("kvod user add did not finish within 30 s") }
            arguments += ["--in-memory", "--users", usersFile]
        }
        if let maxConnections { arguments += ["--max-connections", String(maxConnections)] }

        var pipeEnds: [Int32] = [0, 0]
        guard pipe(&pipeEnds) == 0 else { fail("pipe: \(String(cString: strerror(errno)))") }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
        let pid = ChildProcesses.spawn(wrapper + arguments, standardOutput: pipeEnds[1])
        Glibc.close(pipeEnds[1])
        defer { Glibc.close(pipeEnds[0]) }

        // Read the first line of standard output: "kvod listening on 127.0.0.1:PORT".
        var line: [UInt8] = []
        let deadline = monotonicNanoseconds() + (wrapper.isEmpty ? 20_000_000_000 : 300_000_000_000)
        while !line.contains(0x0A) {
            var poller = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let remaining = Int32(max(0, Int64(deadline) - Int64(monotonicNanoseconds())) / 1_000_000)
            guard remaining > 0, poll(&poller, 1, remaining) > 0 else {
                kill(pid, SIGKILL)
                fail("\(executable) did not print 'kvod listening on HOST:PORT' in time")
            }
            var chunk = [UInt8](repeating: 0, count: 256)
            let count = chunk.withUnsafeMutableBytes { read(pipeEnds[0], $0.baseAddress, $0.count) }
            guard count > 0 else {
                _ = ChildProcesses.wait(pid, seconds: 1)
                fail("\(arguments.joined(separator: " ")) exited before listening (is kvod built? swift build -c release)")
            }
            line += chunk[0..<count]
        }
        let text = String(decoding: line.prefix { $0 != 0x0A }, as: UTF8.self)
        guard text.hasPrefix("kvod listening on "), let colon = text.lastIndex(of: ":"),
              let port = UInt16(text[text.index(after: colon)...]) else {
            kill(pid, SIGKILL)
            fail("unexpected first line from kvod: \(text)")
        }
        return ServerProcess(kind: .kvod(storage), pid: pid, port: port, dataDirectory: dataDirectory, logFile: nil)
    }

    // MARK: redis-server

    private static func startRedis(executable: String, maxConnections: Int?) -> ServerProcess {
        let logFile = "/tmp/kvod-bench-redis-\(getpid())-\(monotonicNanoseconds()).log"
        for attempt in 1...3 {
            let port = TCPSocket.freeLoopbackPort()
            let arguments = [executable, "--bind", "127.0.0.1", "--port", String(port), "--save", "", "--appendonly", "no",
                             "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--logfile", logFile,
                             "--maxclients", String(max(10_000, (maxConnections ?? 0) + 100))]
            let pid = ChildProcesses.spawn(arguments, standardOutput: nil)
            let server = ServerProcess(kind: .redis, pid: pid, port: port, dataDirectory: nil, logFile: logFile)
            let deadline = monotonicNanoseconds() + 20_000_000_000
            while server.isRunning && monotonicNanoseconds() < deadline {
                if redisAnswersPing(port: port) { return server }
                usleep(20_000)
            }
            let log = ProcessStats.readFile(logFile) ?? ""
            server.stop()
            if attempt == 3 {
                fail("\(executable) did not answer PING on 127.0.0.1:\(port) (install it: apt-get install redis-server). Its log:\n\(log)")
            }
        }
        fail("unreachable")
    }

    /// One blocking PING over a fresh connection.
    private static func redisAnswersPing(port: UInt16) -> Bool {
        let fd = TCPSocket.connectLoopback(port: port)
        defer { Glibc.close(fd) }
        var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&poller, 1, 1000) > 0, TCPSocket.pendingError(fd) == 0 else { return false }
        let ping = Array("*1\r\n$4\r\nPING\r\n".utf8)
        guard send(fd, ping, ping.count, Int32(MSG_NOSIGNAL)) == ping.count else { return false }
        poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 1000) > 0 else { return false }
        var reply = [UInt8](repeating: 0, count: 64)
        let count = recv(fd, &reply, reply.count, 0)
        return count >= 5 && Array(reply[0..<5]) == Array("+PONG".utf8)
    }

    // MARK: Files

    private static func makeTemporaryDirectory() -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
        var template = Array((base + "/kvod-bench-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { fail("mkdtemp: \(String(cString: strerror(errno)))") }
        return String(cString: made)
    }

    /// Removes a directory of plain files (kvod's data directory).
    private func removeTree(_ directory: String) {
        if let stream = opendir(directory) {
            while let entry = readdir(stream) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." { unlink(directory + "/" + name) }
            }
            closedir(stream)
        }
        rmdir(directory)
    }
}

/// Child processes (servers, perf) this benchmark started: spawned here, and killed if the benchmark
/// itself is interrupted, so no server outlives it.
enum ChildProcesses {
    private static let capacity = 64
    /// Live child pids (0: free slot), read by the signal handler; a fixed C array because a handler may
    /// not allocate.
    nonisolated(unsafe) private static let pids: UnsafeMutablePointer<pid_t> = {
        let pointer = UnsafeMutablePointer<pid_t>.allocate(capacity: capacity)
        pointer.initialize(repeating: 0, count: capacity)
        return pointer
    }()

    /// On SIGINT or SIGTERM, SIGKILL every child and exit 130.
    static func installInterruptHandler() {
        _ = pids
        let handler: @convention(c) (Int32) -> Void = { _ in
            for index in 0..<ChildProcesses.capacity where ChildProcesses.pids[index] > 0 {
                kill(ChildProcesses.pids[index], SIGKILL)
            }
            _exit(130)
        }
        signal(SIGINT, handler)
        signal(SIGTERM, handler)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Starts `arguments[0]` (looked up on the PATH) with `arguments`, standard output on `standardOutput`
    /// (or /dev/null when nil) and standard error inherited.
    static func spawn(_ arguments: [String], standardOutput: Int32?) -> pid_t {
        fflush(nil)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let standardOutput {
            posix_spawn_file_actions_adddup2(&actions, standardOutput, 1)
        } else {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        let argv = arguments.map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, arguments[0], &actions, nil, argv, environ)
        guard status == 0 else { fail("cannot start \(arguments[0]): \(String(cString: strerror(status)))") }
        for index in 0..<capacity where pids[index] == 0 {
            pids[index] = pid
            break
        }
        return pid
    }

    /// Waits up to `seconds` for `pid` to exit; true if it did (and was reaped).
    static func wait(_ pid: pid_t, seconds: Double) -> Bool {
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid || (result < 0 && errno == ECHILD) {
                forget(pid)
                return true
            }
            if monotonicNanoseconds() >= deadline { return false }
            usleep(10_000)
        }
    }

    /// SIGKILLs every child still running (when the benchmark gives up).
    static func killAll() {
        for index in 0..<capacity where pids[index] > 0 {
            kill(pids[index], SIGKILL)
            _ = wait(pids[index], seconds: 5)
        }
    }

    /// Removes `pid` from the interrupt handler's list.
    static func forget(_ pid: pid_t) {
        for index in 0..<capacity where pids[index] == pid { pids[index] = 0 }
    }
}

/// Writes `text` to standard error (file descriptor 2, unbuffered; Swift 6 forbids touching C's `stderr`
/// global).
func printError(_ text: String) {
    var text = text
    text.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(2, bytes.baseAddress! + offset, bytes.count - offset)
            if written <= 0 { return }
            offset += written
        }
    }
}

/// Prints `kvod-bench: <message>` on standard error, stops every child process and exits 1.
func fail(_ message: String) -> Never {
    printError("kvod-bench: \(message)\n")
    ChildProcesses.killAll()
    exit(1)
}
