#if canImport(Glibc)
import Glibc
#endif

/// The process figures `GET /metrics` reports beside kvod's own (the names Prometheus' client libraries
/// use: `process_start_time_seconds`, `process_cpu_seconds_total`, `process_open_fds`, `process_max_fds`,
/// `process_resident_memory_bytes`, `process_virtual_memory_bytes`), read from the kernel when scraped.
///
/// A value; `read()` and `now()` may run on any thread (the server calls it on the loop thread, once per
/// scrape: a getrusage, a getrlimit, one read of /proc/self/statm, and one directory listing of /proc/self/fd,
/// about a microsecond per open descriptor).
struct ProcessStatistics {
    /// User plus system CPU time the process has used, in seconds.
    var cpuSeconds: Double
    /// Open file descriptors (entries of /proc/self/fd); nil where there is no procfs.
    var openDescriptors: Int?
    /// The soft limit on open file descriptors (`RLIMIT_NOFILE`); nil when unlimited or unknown.
    var maximumDescriptors: Int?
    /// Resident set size in bytes (/proc/self/statm); nil where there is no procfs.
    var residentMemoryBytes: Int?
    /// Virtual memory size in bytes (/proc/self/statm, VmSize); nil where there is no procfs.
    var virtualMemoryBytes: Int?

    /// The figures now.
    static func read() -> ProcessStatistics {
        let memory = memoryBytes()
        return ProcessStatistics(cpuSeconds: cpuSeconds(), openDescriptors: openDescriptors(), maximumDescriptors: maximumDescriptors(),
                                 residentMemoryBytes: memory?.resident, virtualMemoryBytes: memory?.virtual)
    }

    /// The wall-clock time now, in seconds since the Unix epoch (`process_start_time_seconds` is this, taken
    /// when the server's metrics are made, at start-up).
    static func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    private static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage) == 0 else { return 0 }
        let user = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        let system = Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
        return user + system
    }

    /// The entries of /proc/self/fd, less the one the listing itself opens.
    private static func openDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { name in
                name[0] == UInt8(ascii: ".") && (name[1] == 0 || (name[1] == UInt8(ascii: ".") && name[2] == 0))
            }
            if !isDot { count += 1 }
        }
        return max(count - 1, 0)
    }

    private static func maximumDescriptors() -> Int? {
        var limit = rlimit()
        // RLIM_INFINITY is all ones: past Int.max.
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur <= rlim_t(Int.max) else { return nil }
        return Int(limit.rlim_cur)
    }

    /// Virtual and resident size from /proc/self/statm (its first and second fields, in pages).
    private static func memoryBytes() -> (virtual: Int, resident: Int)? {
        guard let file = fopen("/proc/self/statm", "r") else { return nil }
        defer { fclose(file) }
        var line = [UInt8](repeating: 0, count: 128)
        let read = line.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { fgets($0.baseAddress, Int32($0.count - 1), file) != nil }
        }
        guard read else { return nil }
        let fields = line.prefix { $0 != 0 && $0 != 0x0A }.split(separator: 0x20)
        guard fields.count >= 2, let virtualPages = Int(String(decoding: fields[0], as: UTF8.self)),
              let residentPages = Int(String(decoding: fields[1], as: UTF8.self)) else { return nil }
        let pageSize = sysconf(Int32(_SC_PAGESIZE))
        return (virtualPages * pageSize, residentPages * pageSize)
    }
}
