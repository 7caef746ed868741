import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// `atLeastRev` on one kvod (single mode; the cluster's waiting is in `ClusterTests`): a revision the
/// server has reached is answered as usual; one beyond it is refused at once with `bad_request` (no
/// other node will bring it); the field goes with get, list, info and observe only.
@Suite("atLeastRev over TCP")
struct AtLeastRevOverTCPTests {
    @Test("single mode: reached revisions are served, later ones and other operations are bad_request")
    func singleMode() throws {
        let server = try KVODProcess()
        let client = try server.connect()
        let rev = try #require(try client.call("create", ["object": "doc", "values": ["n": 1]])["rev"]?.intValue)
        expectEqual(try client.call("get", ["object": "doc", "keyPath": "n", "atLeastRev": .int(rev)])["value"], 1)
        expectEqual(try client.call("list", ["atLeastRev": .int(rev)])["objects"], ["doc"])
        expectEqual(try client.call("info", ["object": "doc", "atLeastRev": 0])["ok"], true)
        #expect(try client.call("observe", ["object": "doc", "keyPath": "n", "atLeastRev": .int(rev)])["sub"] != nil)
        let started = Date()
        let beyond = try client.request("get", ["object": "doc", "atLeastRev": .int(rev + 1)])
        expectEqual(beyond["error"]?["code"], "bad_request", "\(beyond)")
        #expect(Date().timeIntervalSince(started) < 1, "answered at once")
        let observeBeyond = try client.request("observe", ["object": "doc", "keyPath": "n", "atLeastRev": .int(rev + 5)])
        expectEqual(observeBeyond["error"]?["code"], "bad_request", "\(observeBeyond)")
        let onWrite = try client.request("set", ["object": "doc", "keyPath": "n", "value": 2, "atLeastRev": 0])
        expectEqual(onWrite["error"]?["code"], "bad_request", "\(onWrite)")
        expectEqual(try client.call("get", ["object": "doc", "keyPath": "n"])["value"], 1, "the refused set changed nothing")
        let notARevision = try client.request("get", ["object": "doc", "atLeastRev": "1"])
        expectEqual(notARevision["error"]?["code"], "bad_request", "\(notARevision)")
    }
}
