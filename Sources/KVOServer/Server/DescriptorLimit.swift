#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import KVOEngine
import KVOModel
#endif

/// The process's limit on open file descriptors (`RLIMIT_NOFILE`) measured against what kvod needs:
/// one descriptor per connection plus `reserved` of its own.
///
/// A value type; any thread may read it. `raise(forConnections:)` changes the process's soft limit and
/// is meant for start-up, before the server opens anything (kvod's `main` calls it).
package struct DescriptorLimit: Sendable, Equatable {
    /// Descriptors kvod uses besides one per connection: standard input, output and error, the
    /// listener, the event loop's epoll, eventfd and signal descriptors, the database and its WAL,
    /// SQLite's temporary files, libuv's spare descriptor for `EMFILE`, and slack for the C library.
    package static let reserved = 32

    /// The soft limit in force (after any raise); `Int.max` for unlimited.
    package var soft: Int
    /// The hard limit, the most an unprivileged process may raise the soft limit to.
    package var hard: Int
    /// The soft limit before `raise(forConnections:)` raised it; nil when it was left alone.
    package var raisedFrom: Int?

    /// How many connections fit under the soft limit next to kvod's own descriptors.
    package var connectionCapacity: Int { soft == Int.max ? Int.max : max(soft - DescriptorLimit.reserved, 0) }

    /// Descriptors needed for `connections` connections.
    package static func needed(forConnections connections: Int) -> Int {
        connections > Int.max - reserved ? Int.max : connections + reserved
    }

    /// The limits in force, unchanged.
    package static func current() -> DescriptorLimit {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return DescriptorLimit(soft: Int.max, hard: Int.max, raisedFrom: nil)
        }
        return DescriptorLimit(soft: clamped(limit.rlim_cur), hard: clamped(limit.rlim_max), raisedFrom: nil)
    }

    /// Raises the soft limit, as far as the hard limit allows, to what `connections` connections
    /// need, and returns the limits then in force. Never lowers it.
    package static func raise(forConnections connections: Int) -> DescriptorLimit {
        let before = current()
        let needed = needed(forConnections: connections)
        guard before.soft < needed else { return before }
        let target = min(needed, before.hard)
        guard target > before.soft else { return before }
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return before }
        limit.rlim_cur = rlim_t(target)
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return before }
        var after = current()
        after.raisedFrom = before.soft
        return after
    }

    private static func clamped(_ value: rlim_t) -> Int {
        value >= rlim_t(Int.max) ? Int.max : Int(value)
    }
}
