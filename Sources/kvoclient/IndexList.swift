import ArgumentParser

/// A comma-separated list of array indexes given on the command line (`0,2,5`).
enum IndexList {
    /// Parses the list; each entry must be a whole number, 0 or more (the server checks the upper end).
    static func parse(_ text: String) throws(ValidationError) -> [Int64] {
        var result: [Int64] = []
        for entry in text.split(separator: ",", omittingEmptySubsequences: false) {
            do {
                result.append(try NumberArgument.index(String(entry.filter { $0 != " " })))
            } catch {
                throw ValidationError("--indexes '\(text)': \(error.description)")
            }
        }
        return result
    }
}
