import KVOJSON

/// The known name a misspelt one probably meant, for "unknown field 'ifequals' (did you mean 'ifEquals'?)"
/// (request fields, the members of objects inside requests, `KVOD_*` variables): the same name in another case,
/// else the closest one within a small edit distance (1 for names of up to four characters, 2 beyond).
///
/// Stateless; any thread. Only on error paths: it compares the name with every candidate.
public enum NameSuggestion {
    /// The candidate `name` probably meant; nil when none is close.
    public static func closest(to name: String, among candidates: [String]) -> String? {
        let lowered = name.lowercased()
        if let same = candidates.first(where: { $0.lowercased() == lowered }) { return same }
        let limit = name.count <= 4 ? 1 : 2
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(Array(lowered.unicodeScalars), Array(candidate.lowercased().unicodeScalars))
            if distance <= limit, distance < (best?.distance ?? Int.max) { best = (candidate, distance) }
        }
        return best?.name
    }

    /// "unknown field 'NAME'" with " (did you mean 'X'?)" when one is close; `where` (e.g. " in 'ifEquals'")
    /// after the name. The name is escaped and shortened (`PrintableText`).
    public static func unknownField(_ name: String, among candidates: [String], where place: String = "") -> String {
        let shown = "unknown field '\(PrintableText.escaped(name, limit: 64))'\(place)"
        guard let suggestion = closest(to: name, among: candidates) else { return shown }
        return "\(shown) (did you mean '\(suggestion)'?)"
    }

    /// Levenshtein distance (insertions, deletions, substitutions), with one row of memory.
    static func editDistance(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}
