import KVOEngine
import KVOModel

/// How `Server.run()` ended.
public struct ShutdownReport: Sendable {
    /// `uv_loop_close` returned 0: every handle was closed and its memory released.
    public let loopClosedCleanly: Bool
    /// Handles still open when the loop was closed (empty when `loopClosedCleanly`).
    public let leakedHandles: [String]
}
