import KVOJSON
import KVOModel
import KVOEngine

/// Encodes replies: `{"id":…,"ok":true,…}` and `{"id":…,"ok":false,"error":{…}}`, each ending in `\n`.
///
/// Stateless; any thread, each caller with its own buffer.
package enum ReplyEncoder {
    /// Appends a success reply; `fields` are written in the order given, after `id` and `ok`.
    package static func success(id: JSONValue?, fields: [(String, JSONValue)], into buffer: inout [UInt8]) {
        success(id: id, fields: ReplyFields(fields), into: &buffer)
    }

    /// Appends a success reply; `fields` are written in the order given, after `id` and `ok`.
    package static func success(id: JSONValue?, fields: ReplyFields, into buffer: inout [UInt8]) {
        // The reply to every write, `{"id":N,"ok":true,"rev":R}`: written into one scratch and appended in one
        // copy (`ByteScratch`), the same bytes as the general loop below.
        if let rev = fields.onlyRevision {
            ByteScratch.append(atMost: 64 + idBound(id), to: &buffer) { line in
                line.append(UInt8(ascii: "{"))
                if let id {
                    line.append("\"id\":")
                    appendID(id, to: &line)
                    line.append(UInt8(ascii: ","))
                }
                line.append("\"ok\":true,\"rev\":")
                line.appendInteger(rev)
                line.append("}\n")
            }
            return
        }
        begin(id: id, into: &buffer)
        JSONWriter.append("\"ok\":true", to: &buffer)
        for (name, value) in fields {
            buffer.append(UInt8(ascii: ","))
            JSONWriter.writeString(name, into: &buffer)
            buffer.append(UInt8(ascii: ":"))
            JSONWriter.write(value, into: &buffer)
        }
        JSONWriter.append("}\n", to: &buffer)
    }

    /// Appends an error reply.
    package static func failure(id: JSONValue?, error: KVOError, into buffer: inout [UInt8]) {
        begin(id: id, into: &buffer)
        JSONWriter.append("\"ok\":false,\"error\":{\"code\":", to: &buffer)
        JSONWriter.writeString(error.code.rawValue, into: &buffer)
        JSONWriter.append(",\"message\":", to: &buffer)
        JSONWriter.writeString(error.message, into: &buffer)
        for (name, value) in error.details.sorted(by: { $0.key < $1.key }) {
            buffer.append(UInt8(ascii: ","))
            JSONWriter.writeString(name, into: &buffer)
            buffer.append(UInt8(ascii: ":"))
            JSONWriter.write(value, into: &buffer)
        }
        JSONWriter.append("}}\n", to: &buffer)
    }

    /// The most `appendID` writes for `id`.
    private static func idBound(_ id: JSONValue?) -> Int {
        guard let id else { return 0 }
        switch id {
        case .int: return 21
        case let .string(text): return ByteScratch.quotedBound(utf8Count: text.utf8.count)
        default: return JSONWriter.encodedLength(of: id)
        }
    }

    /// Writes a request's `id` (a scalar), as `JSONWriter.write` does.
    private static func appendID(_ id: JSONValue, to line: inout ByteScratch) {
        switch id {
        case let .int(number): line.appendInteger(number)
        case let .string(text): line.appendString(text)
        default: line.append(JSONWriter.bytes(id))
        }
    }

    private static func begin(id: JSONValue?, into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "{"))
        if let id {
            JSONWriter.append("\"id\":", to: &buffer)
            JSONWriter.write(id, into: &buffer)
            buffer.append(UInt8(ascii: ","))
        }
    }
}
