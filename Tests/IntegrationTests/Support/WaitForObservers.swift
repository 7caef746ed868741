import Foundation
import KVOWireProbe
import KVOJSON
import Testing

/// Polls `info` until `object` has `count` observers, or fails the test after `timeout` seconds.
@discardableResult
func waitForObservers(
    _ connection: KVOConnection, object: String, count: Int, timeout: Double = 10,
    sourceLocation: SourceLocation = #_sourceLocation
) throws -> [JSONValue] {
    let deadline = Date().addingTimeInterval(timeout)
    while true {
        let observers = try connection.call("info", ["object": .string(object)])["observers"]?.arrayValue ?? []
        if observers.count == count { return observers }
        if Date() > deadline {
            Issue.record("\(object) has \(observers.count) observers, expected \(count)", sourceLocation: sourceLocation)
            return observers
        }
        usleep(10_000)
    }
}
