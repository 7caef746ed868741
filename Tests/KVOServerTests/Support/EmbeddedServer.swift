import KVOJSON
import Logging
import Testing

@testable import KVOServer

/// In-process servers for the tests that drive one with `EmbeddedConnection`s on a clock they turn
/// (`ManualClockServerTests`, `WritePathTests`). Test thread only, like the server it makes.
enum EmbeddedServer {
    /// An in-memory (or `storage`) server with no listener, on `clock`.
    static func make(clock: ServerClock, storage: StorageConfiguration? = nil, usersFile: String? = nil,
                     logger: Logger? = nil,
                     _ configure: (inout ServerConfiguration) -> Void = { _ in }) throws -> Server {
        var configuration = ServerConfiguration()
        configuration.isEmbedded = true
        configuration.listensForPlaintext = false
        configuration.firstRequestTimeout = 0
        // Tests that turn the clock by minutes with quiet connections: the idle timeout is `IdleTimeoutTests`' (they set it).
        configuration.idleTimeout = 0
        configuration.clock = clock
        configuration.storage = storage
        configuration.usersFile = usersFile
        if let logger { configuration.logger = logger }
        configure(&configuration)
        return try Server(configuration: configuration)
    }
}

extension EmbeddedConnection {
    /// Sends `request` and returns its reply (events before it are left out), parsed.
    @discardableResult
    func call(_ request: String) throws -> JSONValue {
        send(line: request)
        let lines = takeLines()
        let replies = try lines.map { try JSONParser.parse($0) }.filter { $0["event"] == nil && $0["s"] == nil }
        try #require(replies.count == 1, "one reply to \(request): \(lines)")
        return replies[0]
    }
}
