import KVOJSON
import KVOModel
import KVOEngine

/// Encodes replies: `{"id":…,"ok":true,…}` and `{"id":…,"ok":false,"error":{…}}`, each ending in `\n`.
///
/// Stateless; any thread, each caller with its own buffer.
package enum ReplyEncoder {
    /// Appends a success reply; `fields` are written in the order given, after `id` and `ok`.
    package static func success(id: JSONValue?, fields: [(String, JSONValue)], into buffer: inout [UInt8]) {
        begin(id: id, into: &buffer)
        // The reply to every write, `{"id":N,"ok":true,"rev":R}`: its fixed text in one piece, and
        // the revision written directly (the same bytes as the general loop below).
        if fields.count == 1, fields[0].0 == "rev", case let .int(rev) = fields[0].1 {
            JSONWriter.append("\"ok\":true,\"rev\":", to: &buffer)
            JSONWriter.writeInteger(rev, into: &buffer)
            JSONWriter.append("}\n", to: &buffer)
            return
        }
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

    private static func begin(id: JSONValue?, into buffer: inout [UInt8]) {
        buffer.append(UInt8(ascii: "{"))
        if let id {
            JSONWriter.append("\"id\":", to: &buffer)
            JSONWriter.write(id, into: &buffer)
            buffer.append(UInt8(ascii: ","))
        }
    }
}
