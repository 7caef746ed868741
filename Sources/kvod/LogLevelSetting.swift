import Logging
import Synchronization

/// kvod's one log level, shared by every handler the logging system makes (each `Logger` copy holds a
/// handler of its own): a SIGHUP reload that changes `--log-level` changes it for all of them at once.
/// Written on the loop thread (start-up, reload), read on every thread that logs; an atomic.
final class LogLevelSetting: Sendable {
    private let index: Atomic<Int>

    init(_ level: Logger.Level) {
        index = Atomic(Logger.Level.allCases.firstIndex(of: level)!)
    }

    var level: Logger.Level {
        get { Logger.Level.allCases[index.load(ordering: .relaxed)] }
        set { index.store(Logger.Level.allCases.firstIndex(of: newValue)!, ordering: .relaxed) }
    }
}
