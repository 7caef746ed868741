import ArgumentParser

/// A comma-separated list of array indexes given on the command line (`0,2,5`).
enum IndexList {
    /// Parses the list; each entry must be an integer (the server checks the range).
    static func parse(_ text: String) throws(ValidationError) -> [Int64] {
        var result: [Int64] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let index = Int64(entry.filter { $0 != " " }) else {
                throw ValidationError("'\(entry)' in '\(text)' is not an index (a whole number)")
            }
            result.append(index)
        }
        return result
    }
}
