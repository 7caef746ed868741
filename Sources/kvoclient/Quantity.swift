/// Sizes and durations as `kvoclient status` shows them to people (`12.5 MiB`, `3 h 4 min`). Pure functions; any
/// thread.
enum Quantity {
    /// `n B` under 1 KiB, else KiB, MiB, GiB or TiB with one decimal; `?` when unknown.
    static func bytes(_ value: Int64?) -> String {
        guard let value else { return "?" }
        guard value >= 1024 else { return "\(value) B" }
        var amount = Double(value)
        for unit in ["KiB", "MiB", "GiB", "TiB"] {
            amount /= 1024
            if amount < 1024 || unit == "TiB" { return "\(tenths(amount)) \(unit)" }
        }
        return "\(value) B"
    }

    /// `12.3 s` under a minute, else days, hours and minutes (`2 d 3 h 4 min`).
    static func duration(_ seconds: Double) -> String {
        guard seconds >= 60 else { return "\(tenths(seconds)) s" }
        let minutes = Int(seconds / 60), days = minutes / 1440, hours = minutes / 60 % 24
        var parts: [String] = []
        if days > 0 { parts.append("\(days) d") }
        if days > 0 || hours > 0 { parts.append("\(hours) h") }
        parts.append("\(minutes % 60) min")
        return parts.joined(separator: " ")
    }

    private static func tenths(_ value: Double) -> String {
        let scaled = Int((value * 10).rounded())
        return "\(scaled / 10).\(scaled % 10)"
    }
}
