import Glibc

/// Starts the kvod the benchmarks measure and reads the ports it prints, one stdout line per listener
/// (`kvod listening on 127.0.0.1:PORT`, then TLS, then HTTP, in that order). Main thread.
enum ListeningKVOD {
    /// kvod with `arguments` (after the executable and `--host 127.0.0.1 --log-level warning`), and the ports
    /// of its first `listeners` stdout lines, in the order kvod prints them. Fails the run when kvod exits first.
    static func start(_ arguments: [String], listeners: Int = 1) -> (pid: pid_t, ports: [Int]) {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { fail("pipe failed") }
        let pid = ChildProcesses.spawn([Executables.defaults().kvod, "--host", "127.0.0.1", "--log-level", "warning"]
            + arguments, standardOutput: ends[1])
        Glibc.close(ends[1])
        defer { Glibc.close(ends[0]) }
        var text: [UInt8] = []
        while text.lazy.filter({ $0 == 0x0A }).count < listeners {
            var chunk = [UInt8](repeating: 0, count: 256)
            let count = chunk.withUnsafeMutableBytes { read(ends[0], $0.baseAddress, $0.count) }
            guard count > 0 else { fail("kvod exited before listening (swift build -c release --product kvod)") }
            text += chunk[0..<count]
        }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n").prefix(listeners)
        let ports = lines.compactMap { $0.split(separator: ":").last.flatMap { Int($0) } }
        guard ports.count == listeners else { fail("unexpected lines from kvod: \(Array(lines))") }
        return (pid, ports)
    }
}
