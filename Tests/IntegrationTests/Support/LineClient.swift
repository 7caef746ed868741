import Foundation
import KVOWireProbe
import KVOJSON

/// A connection read line by line, for tests that check event lines byte for byte (compact events
/// carry no `event` member, so `KVOConnection.request` would not know them from stray replies).
///
/// `roundTrip` sends one request with a fresh `id` and reads up to its reply; every other line read
/// meanwhile (events, in arrival order) is kept in `events` as the bytes received. One test thread.
final class LineClient {
    let connection: KVOConnection
    /// Lines that were not the reply being waited for, without their newline, in arrival order.
    private(set) var events: [[UInt8]] = []
    private var nextID: Int64 = 1

    init(_ connection: KVOConnection) {
        self.connection = connection
    }

    /// Sends `op` with `params` and an `id`; returns the reply, keeping the lines before it in `events`.
    @discardableResult
    func roundTrip(_ op: String, _ params: [String: JSONValue] = [:]) throws -> JSONValue {
        let id = nextID
        nextID += 1
        var message = params
        message["op"] = .string(op)
        message["id"] = .int(id)
        try connection.send(.object(message))
        return try reply(to: .int(id))
    }

    /// Sends `line` as it is (plus a newline) with `id` inside it; returns the reply with that `id`.
    func roundTrip(raw line: String, id: JSONValue) throws -> JSONValue {
        try connection.send(raw: Array(line.utf8) + [0x0A])
        return try reply(to: id)
    }

    /// `roundTrip`, throwing unless the reply is `ok`.
    @discardableResult
    func call(_ op: String, _ params: [String: JSONValue] = [:]) throws -> JSONValue {
        let reply = try roundTrip(op, params)
        guard reply["ok"] == true else { throw LineClientError.refused("\(op): \(reply)") }
        return reply
    }

    /// Takes the events kept so far (after a `ping`, so that every event queued before it has arrived).
    func takeEvents() throws -> [[UInt8]] {
        try call("ping")
        defer { events.removeAll() }
        return events
    }

    private func reply(to id: JSONValue) throws -> JSONValue {
        while true {
            let line = try connection.readLine(timeout: 10)
            let message = try JSONParser.parse(line)
            if message["ok"] != nil, message["id"] == id { return message }
            events.append(line)
        }
    }
}

enum LineClientError: Error {
    case refused(String)
}
