import KVOEngine
import KVOModel

/// What a `Connection` tells its owner. The transport knows bytes and lines; the delegate knows
/// requests. Called on the loop thread only.
protocol ConnectionDelegate: AnyObject {
    /// One complete line arrived (valid only during the call).
    func connection(_ connection: Connection, didReceiveLine line: UnsafeBufferPointer<UInt8>)
    /// A line passed the length limit and is being discarded.
    func connectionDidReceiveOversizedLine(_ connection: Connection)
    /// Whether output queued now may be written at once. False while writes accepted in this loop
    /// iteration are not yet durable: replies and events about them must wait for the group commit.
    var mayWriteImmediately: Bool { get }
    /// `connection` has output to send this loop iteration.
    func connectionNeedsFlush(_ connection: Connection)
    /// The loop's unfinished request lines together passed the total input limit after a read on
    /// `connection`: the owner closes the connections holding the most until it is under again.
    func connectionsPassedTotalInputLimit(_ connection: Connection)
    /// A TLS `connection` finished its handshake (`verifiedClientCommonName` is known from here on).
    func connectionDidCompleteTLSHandshake(_ connection: Connection)
    /// `connection` was resumed (`Connection.resumeReading`) with lines held from before its pause:
    /// the owner calls `connection.replayHeldInput()` soon, at a point where it is not handling a line
    /// (the loop must not block in between).
    func connectionHasHeldInput(_ connection: Connection)
    /// `connection` started closing; no more lines will arrive and output is dropped.
    func connectionDidClose(_ connection: Connection, reason: CloseReason)

    /// A complete HTTP request on a connection of the HTTP listener (the delegate answers it with
    /// `sendHTTPResponse` or upgrades the connection with `upgradeToWebSocket`).
    func connection(_ connection: Connection, didReceiveHTTPRequest request: HTTPRequestHead)

    /// Bytes on the HTTP listener that are no acceptable request: the delegate answers `status` and closes.
    func connection(_ connection: Connection, didRefuseHTTPRequest status: HTTPStatus, reason: String)
}
