import Foundation
import KVOJSON
import KVOWireProbe

extension KVOConnection {
    /// The change events that arrive on this connection within `timeout` seconds, all of them (the caller counts);
    /// other events are read and dropped. For tests that prove how many changes a window holds.
    func changeEvents(within timeout: Double) throws -> [JSONValue] {
        let deadline = Date().addingTimeInterval(timeout)
        var events: [JSONValue] = []
        while Date() < deadline, let event = try nextEvent(timeout: max(0.05, deadline.timeIntervalSinceNow)) {
            if event["event"] == "change" { events.append(event) }
        }
        return events
    }
}
