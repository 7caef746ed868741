import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// `GET /metrics`' pieces (issue 14): the histogram's buckets, the exposition format's escaping, and
/// the server's counters as they are rendered. The endpoint itself is tested over HTTP with a real
/// Prometheus parser (Tests/Web).
@Suite("metrics")
struct MetricsTests {
    private func text(_ metrics: ServerMetrics) -> String {
        String(decoding: metrics.render(ServerMetrics.Gauges(
            objects: 3, observations: 4, revision: 5, historyEntries: 6, historyBytes: 7, storedBytes: 8,
            outputBufferedBytes: 9, inputBufferedBytes: 10)), as: UTF8.self)
    }

    private func lines(_ text: String) -> [Substring] { text.split(separator: "\n") }

    @Test("a histogram counts each observation in its bucket; rendered, the buckets are cumulative")
    func histogramBuckets() {
        var histogram = MetricsHistogram(boundsNanoseconds: [1_000, 10_000, 100_000])
        for nanoseconds: UInt64 in [500, 1_000, 1_001, 50_000, 5_000_000] { histogram.observe(nanoseconds: nanoseconds) }
        expectEqual(histogram.count, 5)
        expectEqual(histogram.sumNanoseconds, 5_052_501)
        expectEqual(histogram.cumulativeCounts, [2, 3, 4, 5])
        var exposition = PrometheusExposition()
        exposition.histogram("t_seconds", histogram)
        #expect(String(decoding: exposition.bytes, as: UTF8.self) == """
            t_seconds_bucket{le="1e-06"} 2
            t_seconds_bucket{le="1e-05"} 3
            t_seconds_bucket{le="0.0001"} 4
            t_seconds_bucket{le="+Inf"} 5
            t_seconds_sum 0.005052501
            t_seconds_count 5

            """)
    }

    @Test("label values and help text are escaped as the text format requires")
    func escaping() {
        var exposition = PrometheusExposition()
        exposition.family("m", type: .gauge, help: "a \\ b\nc \"d\"")
        exposition.sample("m", labels: [("l", "x\"y\\z\nw")], 1)
        #expect(String(decoding: exposition.bytes, as: UTF8.self) == """
            # HELP m a \\\\ b\\nc "d"
            # TYPE m gauge
            m{l="x\\"y\\\\z\\nw"} 1

            """)
    }

    @Test("requests are counted by operation and outcome, and only counted series are rendered")
    func requestCounts() {
        let metrics = ServerMetrics()
        metrics.countRequest(.set, error: nil)
        metrics.countRequest(.set, error: nil)
        metrics.countRequest(.set, error: .notFound)
        metrics.countRequest(.invalid, error: .badRequest)
        expectEqual(metrics.requests(.set, outcome: "ok"), 2)
        expectEqual(metrics.requests(.set, outcome: "not_found"), 1)
        expectEqual(metrics.requests(.get, outcome: "ok"), 0)
        let rendered = lines(text(metrics)).filter { $0.hasPrefix("kvod_requests_total{") }
        #expect(rendered.sorted() == [
            #"kvod_requests_total{op="invalid",outcome="bad_request"} 1"#,
            #"kvod_requests_total{op="set",outcome="not_found"} 1"#,
            #"kvod_requests_total{op="set",outcome="ok"} 2"#,
        ])
    }

    @Test("request durations: one histogram per operation answered, labelled op then le; the build's version and commit")
    func requestDurationsAndBuildInfo() {
        let metrics = ServerMetrics()
        metrics.buildCommit = "0123456789abcdef0123456789abcdef01234567"
        metrics.requestAnswered(.set, nanoseconds: 3_000)
        metrics.requestAnswered(.set, nanoseconds: 40_000)
        metrics.requestAnswered(.invalid, nanoseconds: 2_000_000_000)
        expectEqual(metrics.requestDurations.histogram(.set).count, 2)
        expectEqual(metrics.requestDurations.histogram(.get).count, 0)
        let rendered = lines(text(metrics)).filter { $0.hasPrefix("kvod_request_duration_seconds") }
        #expect(rendered.contains(#"kvod_request_duration_seconds_bucket{op="set",le="5e-06"} 1"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_bucket{op="set",le="5e-05"} 2"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_bucket{op="set",le="+Inf"} 2"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_sum{op="set"} 4.3e-05"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_count{op="set"} 2"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_bucket{op="invalid",le="1.0"} 0"#))
        #expect(rendered.contains(#"kvod_request_duration_seconds_bucket{op="invalid",le="+Inf"} 1"#))
        #expect(!rendered.contains { $0.contains(#"op="get""#) })
        // Per operation: the bounds, +Inf, sum and count.
        expectEqual(rendered.count, 2 * (RequestDurations.boundsNanoseconds.count + 3))
        let info = lines(text(metrics)).filter { $0.hasPrefix("kvod_build_info{") }
        #expect(info.count == 1 && info[0].hasSuffix(#"",commit="0123456789abcdef0123456789abcdef01234567"} 1"#), "\(info)")
    }

    @Test("storage usage gauges: rendered when the server reads some, each figure only when known")
    func storageUsage() {
        let metrics = ServerMetrics()
        #expect(!text(metrics).contains("kvod_storage_database_bytes"))
        metrics.storageUsage = { StorageUsageGauges(databaseBytes: 4096, walBytes: 0, freeBytes: nil, sizeBytes: 1 << 30) }
        let rendered = lines(text(metrics))
        #expect(rendered.contains("kvod_storage_database_bytes 4096"))
        #expect(rendered.contains("kvod_storage_wal_bytes 0"))
        #expect(rendered.contains("kvod_storage_size_bytes 1073741824"))
        #expect(!rendered.contains { $0.contains("kvod_storage_free_bytes") })
    }

    @Test("connections by transport, and slow consumers by the limit that closed them")
    func connectionsAndSlowConsumers() {
        let metrics = ServerMetrics()
        metrics.connectionOpened(.tcp)
        metrics.connectionOpened(.tcp)
        metrics.connectionOpened(.tls)
        metrics.connectionClosed(.tcp, reason: .outputLimitExceeded(queued: 10, limit: 5))
        metrics.connectionClosed(.tls, reason: .totalOutputLimitExceeded(queued: 10, total: 20, limit: 15))
        let rendered = Set(lines(text(metrics)))
        for expected in [
            #"kvod_connections{transport="tcp"} 1"#, #"kvod_connections{transport="tls"} 0"#,
            #"kvod_connections_accepted_total{transport="tcp"} 2"#, #"kvod_connections_accepted_total{transport="tls"} 1"#,
            #"kvod_slow_consumer_disconnects_total{limit="connection"} 1"#,
            #"kvod_slow_consumer_disconnects_total{limit="total"} 1"#,
            "kvod_objects 3", "kvod_observations 4", "kvod_revision 5", "kvod_history_entries 6", "kvod_history_bytes 7",
            "kvod_stored_bytes 8", "kvod_output_buffered_bytes 9", "kvod_input_buffered_bytes 10",
        ] {
            #expect(rendered.contains(Substring(expected)), "missing \(expected)")
        }
    }

    @Test("heartbeats sent, and connections closed for sending nothing within the idle timeout (by their close reason)")
    func idleTimeoutCounters() {
        let metrics = ServerMetrics()
        metrics.connectionOpened(.tcp)
        metrics.connectionOpened(.webSocket)
        metrics.heartbeatsSent &+= 3
        metrics.connectionClosed(.tcp, reason: .idleTimeout(seconds: 60))
        metrics.connectionClosed(.webSocket, reason: .clientClosed)
        let rendered = Set(lines(text(metrics)))
        #expect(rendered.contains("kvod_heartbeats_sent_total 3") && rendered.contains("kvod_idle_closed_total 1"), "\(rendered)")
    }

    @Test("every line is a comment or a well-formed sample, and every family is declared once before its samples")
    func wellFormed() {
        let metrics = ServerMetrics()
        metrics.countRequest(.observe, error: .forbidden)
        metrics.groupCommitted(nanoseconds: 1_500_000)
        var declared: Set<Substring> = []
        for line in lines(text(metrics)) {
            if line.hasPrefix("# TYPE ") {
                let name = line.split(separator: " ")[2]
                #expect(!declared.contains(name), "\(name) declared twice")
                declared.insert(name)
                continue
            }
            if line.hasPrefix("# HELP ") { continue }
            let name = line.prefix { $0 != "{" && $0 != " " }
            let family = declared.first { name == $0 || name == "\($0)_bucket" || name == "\($0)_sum" || name == "\($0)_count" }
            #expect(family != nil, "sample before its TYPE: \(line)")
            let value = line.split(separator: " ").last.map(String.init) ?? ""
            #expect(Double(value) != nil || value == "+Inf", "not a number: \(line)")
        }
        #expect(declared.contains("kvod_group_commit_seconds"))
        #expect(declared.contains("kvod_loop_iteration_seconds"))
    }
}
