import KVOEngine
import KVOModel

/// How hard the persistent store works to keep an acknowledged commit (`kvod --sync`).
///
/// The database is always in WAL journal mode; the mode picks SQLite's `PRAGMA synchronous`:
///
/// - `full`: the WAL is fsynced at every commit, so an acknowledged write survives a process crash and
///   also an operating-system crash or power loss. One fsync per commit (per loop iteration, since the
///   server commits once per iteration).
/// - `normal` (the default): commits are handed to the operating system before `commit` returns but fsynced
///   only at checkpoints, so an acknowledged write survives a crash (or SIGKILL) of kvod; an OS crash or
///   power loss can lose the most recent commits, never corrupting the database.
/// - `off`: SQLite never fsyncs. kvod promises nothing: commits still reach the operating system before
///   `commit` returns (so in practice a process crash loses nothing), but an OS crash or power loss can
///   lose recent commits and can corrupt the database.
///
/// A value type; any thread.
public enum SyncMode: String, Sendable, CaseIterable {
    case full
    case normal
    case off

    /// The value of `PRAGMA synchronous` for this mode (`PRAGMA synchronous` reads back 2, 1, 0).
    var pragmaValue: String {
        switch self {
        case .full: return "FULL"
        case .normal: return "NORMAL"
        case .off: return "OFF"
        }
    }
}
