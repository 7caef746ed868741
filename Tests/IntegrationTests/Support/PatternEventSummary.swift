import KVOWireProbe
import KVOJSON

/// What the pattern and live query tests compare: a connection's events up to now, and each as one line.
enum PatternEventSummary {
    /// Every change event queued or arriving until a `ping` reply (so everything before it is in).
    static func events(_ client: KVOConnection) throws -> [JSONValue] {
        try client.call("ping")
        var events: [JSONValue] = []
        while let event = try client.nextEvent(timeout: 0.01) { events.append(event) }
        return events
    }

    /// `reason object new=… old=…` (`-` for an event without an object; `new`/`old` only when present).
    static func line(_ event: JSONValue) -> String {
        let change = event["change"]
        var text = "\(event["reason"]?.stringValue ?? "?") \(event["object"]?.stringValue ?? "-")"
        if let new = change?["new"] { text += " new=\(new)" }
        if let old = change?["old"] { text += " old=\(old)" }
        return text
    }
}
