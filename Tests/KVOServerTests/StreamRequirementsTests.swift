import KVOJSON
import Testing
@testable import KVOServer

/// The stream settings kvod's replication needs (`StreamRequirements`, docs/design.md, "The stream's settings"),
/// against stream configurations as JetStream's API states them: the one kvod creates passes, each setting
/// that could lose, drop or repeat an acknowledged write refuses, the others warn; one line each.
@Suite("cluster stream requirements")
struct StreamRequirementsTests {
    private let configuration = ClusterConfiguration(servers: ["nats://a:4222", "nats://b:4222", "nats://c:4222"], stream: "kv",
                                                     node: "n1", writeTimeout: 5)

    /// A stream as kvod creates it, in the words of nats-server 2.15.1's `$JS.API.STREAM.INFO` (`config`).
    private func created(_ changes: [String: JSONValue] = [:]) throws -> JSONValue {
        var config = try #require(try JSONParser.parse("""
            {"name":"kv","subjects":["kvod.kv.log"],"retention":"limits","max_consumers":-1,"max_msgs":-1,"max_bytes":-1,
             "max_age":0,"max_msgs_per_subject":-1,"max_msg_size":-1,"discard":"old","storage":"file","num_replicas":3,
             "duplicate_window":120000000000,"compression":"none","allow_direct":false,"mirror_direct":false,"sealed":false,
             "deny_delete":false,"deny_purge":false,"allow_rollup_hdrs":false,"consumer_limits":{},"allow_msg_ttl":false,
             "metadata":{"_nats.level":"5","_nats.req.level":"0","_nats.ver":"2.15.1"}}
            """).objectValue)
        config.merge(changes) { _, new in new }
        return .object(config)
    }

    private func problems(_ changes: [String: JSONValue], writeTimeout: Double = 5) throws -> [StreamRequirements.Problem] {
        var configuration = self.configuration
        configuration.writeTimeout = writeTimeout
        return StreamRequirements(configuration).problems(in: try created(changes))
    }

    @Test("the stream kvod creates fits; the window kvod sets is JetStream's 2 minutes or the write timeout plus 30 s")
    func createdStreamFits() throws {
        #expect(try problems([:]).isEmpty)
        let requirements = StreamRequirements(configuration)
        expectEqual(requirements.minimumDuplicateWindow, 35_000_000_000)
        expectEqual(requirements.duplicateWindow, 120_000_000_000)
        var slow = configuration
        slow.writeTimeout = 100
        expectEqual(StreamRequirements(slow).duplicateWindow, 130_000_000_000)
        // More replicas than kvod would make, and a window of exactly the minimum, are fine.
        #expect(try problems(["num_replicas": 5, "duplicate_window": 35_000_000_000]).isEmpty)
    }

    @Test("what could lose, drop or repeat an acknowledged write refuses, one line each")
    func refusals() throws {
        let cases: [(changes: [String: JSONValue], words: String)] = [
            (["storage": "memory"], "keeps its entries in memory storage"),
            (["num_replicas": 1], "has 1 replica, kvod needs 3"),
            (["duplicate_window": 34_000_000_000], "has a duplicate window of 34s, shorter than the 35s kvod needs"),
            (["subjects": ["other.>"]], "does not capture kvod's subject 'kvod.kv.log'"),
            (["retention": "workqueue"], "has workqueue retention"),
            (["retention": "interest"], "has interest retention"),
            (["persist_mode": "async"], "has persist_mode async"),
            (["no_ack": true], "has no_ack set"),
            (["mirror": ["name": "elsewhere"]], "is a mirror of another stream"),
            (["sealed": true], "is sealed"),
            (["max_age": 86_400_000_000_000], "drops entries older than 24h (max_age)"),
            (["max_msgs_per_subject": 1000], "keeps at most 1000 messages on kvod's subject"),
            (["max_msgs": 50_000], "holds at most 50000 messages (max_msgs) and drops the oldest"),
            (["max_bytes": 1_000_000], "holds at most 1000000 bytes (max_bytes) and drops the oldest"),
        ]
        for (changes, words) in cases {
            let found = try problems(changes)
            expectEqual(found.count, 1, "\(changes): \(found)")
            expectEqual(found.first?.refuses, true, "\(changes): \(found)")
            expectEqual(found.first?.text.hasPrefix("stream 'kv' \(words)"), true, "\(changes): \(found.first?.text ?? "none")")
        }
        // Each problem its own line, the refusals first.
        let several = try problems(["storage": "memory", "deny_purge": true, "max_age": 60_000_000_000])
        expectEqual(several.map(\.refuses), [true, true, false], "\(several)")
        // A longer write timeout needs a longer window than JetStream's default.
        #expect(try problems([:], writeTimeout: 100).map(\.text)
            == ["stream 'kv' has a duplicate window of 2m, shorter than the 130s kvod needs (--cluster-write-timeout 100s plus 30s): a retried append could be stored twice and a write applied twice (nats stream edit kv --dupe-window 130s, or a lower --cluster-write-timeout)"])
    }

    @Test("what only fails writes or lets the stream grow warns")
    func warnings() throws {
        let cases: [(changes: [String: JSONValue], words: String)] = [
            (["subjects": ["kvod.kv.log", "audit"]], "captures subjects besides kvod's"),
            (["subjects": ["kvod.kv.*"]], "captures subjects besides kvod's"),
            (["max_msgs": 50_000, "discard": "new"], "holds at most 50000 messages (max_msgs, discarding new)"),
            (["max_msgs_per_subject": 10, "discard": "new", "discard_new_per_subject": true], "holds at most 10 messages per subject"),
            (["deny_purge": true], "denies purges"),
            (["sources": [["name": "other"]]], "sources other streams"),
            (["max_msg_size": 65536], "refuses messages above 65536 bytes"),
        ]
        for (changes, words) in cases {
            let found = try problems(changes)
            expectEqual(found.count, 1, "\(changes): \(found)")
            expectEqual(found.first?.refuses, false, "\(changes): \(found)")
            expectEqual(found.first?.text.hasPrefix("stream 'kv' \(words)"), true, "\(changes): \(found.first?.text ?? "none")")
        }
    }

    @Test("a check repeated while nothing changes logs its problems once")
    func checkLogsOnce() throws {
        let requirements = StreamRequirements(configuration)
        var reported: [StreamRequirements.Problem] = []
        var lines: [String] = []
        let bad = try created(["storage": "memory", "deny_purge": true])
        for _ in 0..<3 {
            let refusal = requirements.check(bad, reported: &reported) { text, _ in lines.append(text) }
            expectEqual(refusal?.contains("the problem logged above"), true, "\(refusal ?? "nil")")
        }
        #expect(lines.count == 2 && lines.allSatisfy { $0.hasPrefix("cluster: stream 'kv' ") }, "\(lines)")
        // Corrected: nothing refuses, nothing more is logged.
        expectEqual(requirements.check(try created([:]), reported: &reported) { text, _ in lines.append(text) }, nil)
        expectEqual(lines.count, 2)
    }

    @Test("subject filters: * is one token, a final > one or more")
    func subjectFilters() {
        #expect(StreamRequirements.subject("kvod.kv.log", matches: "kvod.kv.log"))
        #expect(StreamRequirements.subject("kvod.*.log", matches: "kvod.kv.log"))
        #expect(StreamRequirements.subject("kvod.>", matches: "kvod.kv.log"))
        #expect(StreamRequirements.subject(">", matches: "kvod.kv.log"))
        #expect(!StreamRequirements.subject("kvod.kv", matches: "kvod.kv.log"))
        #expect(!StreamRequirements.subject("kvod.kv.log.>", matches: "kvod.kv.log"))
        #expect(!StreamRequirements.subject("kvod.*", matches: "kvod.kv.log"))
        #expect(!StreamRequirements.subject("kvod.kv.logs", matches: "kvod.kv.log"))
    }
}
