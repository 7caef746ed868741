import KVOJSON

/// The output about bindings: `binding N` for a created one, and the line `bindings` prints for each.
///
/// Used on the main thread only.
enum BindingLine {
    /// Prints `binding N` from a `bind` or `combineLatest` reply.
    static func printCreated(_ reply: [String: JSONValue]) throws(CLIError) {
        guard let id = reply["binding"]?.intValue else { throw .unexpectedReply(JSONValue.object(reply).description) }
        Terminal.printLine("binding \(id)")
    }

    /// One binding of a `bindings` reply, fields separated by two spaces:
    /// `7  a:x -> b:y  filter $value > 0  convert $value * 2` or
    /// `8  combineLatest(a:x, b:y) -> c:z  reduce $0 + $1  filter $0 > 0`. Absent expressions are left out.
    static func text(_ binding: JSONValue) throws(CLIError) -> String {
        guard let id = binding["binding"]?.intValue, let target = KeyPathEndpoint(json: binding["to"]) else {
            throw .unexpectedReply(binding.description)
        }
        var fields = ["\(id)"]
        let expressions: [String]
        switch binding["kind"]?.stringValue {
        case "bind":
            guard let source = KeyPathEndpoint(json: binding["from"]) else { throw .unexpectedReply(binding.description) }
            fields.append("\(source) -> \(target)")
            expressions = ["filter", "convert"]
        case "combineLatest":
            let sources = binding["sources"]?.arrayValue?.compactMap { KeyPathEndpoint(json: $0) } ?? []
            guard !sources.isEmpty, sources.count == binding["sources"]?.arrayValue?.count else {
                throw .unexpectedReply(binding.description)
            }
            fields.append("combineLatest(\(sources.map(\.description).joined(separator: ", "))) -> \(target)")
            expressions = ["reduce", "filter"]
        default:
            throw .unexpectedReply(binding.description)
        }
        for name in expressions {
            guard let expression = binding[name], expression != .null else { continue }
            fields.append("\(name) \(DisplayText.text(expression))")
        }
        return fields.joined(separator: "  ")
    }
}
