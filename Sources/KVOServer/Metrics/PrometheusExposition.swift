import KVOEngine
import KVOModel

/// Writes the Prometheus text exposition format (version 0.0.4): `# HELP` and `# TYPE` lines per
/// family, then `name{label="value"} number` samples.
///
/// Label values here are kvod's own fixed names (operations, error codes, transports), never client
/// text, and are still escaped as the format requires. A value; used on the loop thread by
/// `ServerMetrics.render`.
struct PrometheusExposition {
    enum MetricType: String {
        case counter, gauge, histogram
    }

    private(set) var bytes: [UInt8] = []

    init() {
        bytes.reserveCapacity(8 * 1024)
    }

    mutating func family(_ name: String, type: MetricType, help: String) {
        append("# HELP \(name) ")
        appendEscaped(help, quotes: false)
        append("\n# TYPE \(name) \(type.rawValue)\n")
    }

    mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: some BinaryInteger) {
        append(name)
        appendLabels(labels)
        append(" \(value)\n")
    }

    mutating func sample(_ name: String, labels: [(String, String)] = [], _ value: Double) {
        append(name)
        appendLabels(labels)
        append(" ")
        append(PrometheusExposition.format(value))
        append("\n")
    }

    /// `name_bucket{labels…,le="…"}` per bound (cumulative) and `+Inf`, `name_sum` in seconds, `name_count`.
    mutating func histogram(_ name: String, labels: [(String, String)] = [], _ histogram: MetricsHistogram) {
        let cumulative = histogram.cumulativeCounts
        for (index, bound) in histogram.boundsNanoseconds.enumerated() {
            sample("\(name)_bucket", labels: labels + [("le", PrometheusExposition.format(Double(bound) / 1e9))], cumulative[index])
        }
        sample("\(name)_bucket", labels: labels + [("le", "+Inf")], histogram.count)
        sample("\(name)_sum", labels: labels, Double(histogram.sumNanoseconds) / 1e9)
        sample("\(name)_count", labels: labels, histogram.count)
    }

    private mutating func appendLabels(_ labels: [(String, String)]) {
        guard !labels.isEmpty else { return }
        append("{")
        for (index, (label, value)) in labels.enumerated() {
            if index > 0 { append(",") }
            append(label)
            append("=\"")
            appendEscaped(value, quotes: true)
            append("\"")
        }
        append("}")
    }

    private mutating func append(_ text: String) {
        bytes.append(contentsOf: text.utf8)
    }

    /// Backslash and newline always; double quotes in label values.
    private mutating func appendEscaped(_ text: String, quotes: Bool) {
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\\"): bytes.append(contentsOf: "\\\\".utf8)
            case 0x0A: bytes.append(contentsOf: "\\n".utf8)
            case UInt8(ascii: "\"") where quotes: bytes.append(contentsOf: "\\\"".utf8)
            default: bytes.append(byte)
            }
        }
    }

    /// A float as Prometheus reads it: shortest round-trip form, `+Inf`/`-Inf`/`NaN` for the specials.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        return "\(value)"
    }
}
