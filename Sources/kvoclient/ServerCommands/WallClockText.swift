#if canImport(Glibc)
import Glibc
#endif

/// Times the server reports (ms since 1970) as UTC ISO 8601 with milliseconds (`2026-11-29T18:40:01.123Z`), and
/// durations it reports in microseconds as milliseconds (`52.100`), and seconds to the millisecond (`12.345`), for `slow` and
/// `clients`. Pure; any thread.
enum WallClockText {
    static func iso8601(milliseconds: Int64) -> String {
        var seconds = time_t(milliseconds / 1000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        let fraction = Int(milliseconds % 1000)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))."
            + String(repeating: "0", count: fraction < 10 ? 2 : fraction < 100 ? 1 : 0) + "\(fraction)Z"
    }

    /// Microseconds as milliseconds with three decimals.
    static func milliseconds(micros: Int64) -> String { thousandths(micros) }

    /// `count` thousandths as a number with three decimals (`12345` is `12.345`); never negative.
    static func thousandths(_ count: Int64) -> String {
        let count = max(count, 0)
        let fraction = Int(count % 1000)
        return "\(count / 1000)." + String(repeating: "0", count: fraction < 10 ? 2 : fraction < 100 ? 1 : 0) + "\(fraction)"
    }

    private static func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
