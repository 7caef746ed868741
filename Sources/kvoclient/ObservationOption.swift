import ArgumentParser

/// One of the four KVO observation options, as the protocol spells them.
enum ObservationOption: String, CaseIterable {
    case initial, new, old, prior

    /// Parses a comma-separated list such as `initial,new,old` (white space around names allowed,
    /// duplicates dropped, order kept).
    static func parseList(_ text: String) throws(ValidationError) -> [ObservationOption] {
        var result: [ObservationOption] = []
        for name in text.split(separator: ",", omittingEmptySubsequences: true) {
            let trimmed = name.trimmingSpaces()
            guard let option = ObservationOption(rawValue: trimmed) else {
                let known = allCases.map(\.rawValue).joined(separator: ", ")
                throw ValidationError("unknown option '\(trimmed)' in --options (known: \(known))")
            }
            if !result.contains(option) { result.append(option) }
        }
        return result
    }
}

extension Substring {
    /// The text without leading and trailing spaces.
    fileprivate func trimmingSpaces() -> String {
        String(drop(while: { $0 == " " }).reversed().drop(while: { $0 == " " }).reversed())
    }
}
