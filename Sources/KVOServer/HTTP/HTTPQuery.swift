import KVOJSON
import KVOModel

/// An HTTP API request's query parameters (`name=value&…`, percent-encoded, `+` as a space), checked strictly as a
/// request's fields are: a parameter the route does not take is refused by name, never ignored. A value; any thread.
struct HTTPQuery {
    private(set) var parameters: [(name: String, value: String)] = []

    init(_ query: String?) throws(HTTPAPIProblem) {
        guard let query, !query.isEmpty else { return }
        for pair in query.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = try HTTPAPIRoute.percentDecoded(Substring(parts[0].replacing("+", with: " ")), naming: "query parameter")
            let value = parts.count > 1
                ? try HTTPAPIRoute.percentDecoded(Substring(parts[1].replacing("+", with: " ")), naming: "value of '\(name)'") : ""
            guard !parameters.contains(where: { $0.name == name }) else {
                throw .badRequest("the query parameter '\(name)' is given twice", field: name)
            }
            parameters.append((name, value))
        }
    }

    /// Refuses any parameter not in `allowed`, naming it.
    func requireOnly(_ allowed: Set<String>) throws(HTTPAPIProblem) {
        for (name, _) in parameters where !allowed.contains(name) {
            let known = allowed.isEmpty ? "this route takes none" : "this route takes \(allowed.sorted().joined(separator: ", "))"
            throw .badRequest("unknown query parameter '\(name)' (\(known))", field: name)
        }
    }

    func value(_ name: String) -> String? {
        parameters.first { $0.name == name }?.value
    }

    /// A parameter that must be a non-negative integer.
    func integer(_ name: String) throws(HTTPAPIProblem) -> Int64? {
        guard let text = value(name) else { return nil }
        guard let number = Int64(text), number >= 0 else { throw .badRequest("'\(name)' is a non-negative integer", field: name) }
        return number
    }

    /// A parameter that must be a finite number (as the line's field takes it: an integer stays one).
    func number(_ name: String) throws(HTTPAPIProblem) -> JSONValue? {
        guard let text = value(name) else { return nil }
        if let integer = Int64(text) { return .int(integer) }
        guard let double = Double(text), double.isFinite, text.allSatisfy({ "0123456789.eE+-".contains($0) }) else {
            throw .badRequest("'\(name)' is a number", field: name)
        }
        return .double(double)
    }
}
