import KVOJSON

/// Encodes one request line: `{"id":N,"op":"…",<params>}` and a newline, written straight into bytes.
enum RequestLine {
    static func encode(op: String, id: Int64, params: [String: JSONValue]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(48 + params.count * 24)
        JSONWriter.append("{\"id\":", to: &bytes)
        JSONWriter.writeInteger(id, into: &bytes)
        JSONWriter.append(",\"op\":", to: &bytes)
        JSONWriter.writeString(op, into: &bytes)
        for (key, value) in params {
            bytes.append(UInt8(ascii: ","))
            JSONWriter.writeString(key, into: &bytes)
            bytes.append(UInt8(ascii: ":"))
            JSONWriter.write(value, into: &bytes)
        }
        bytes.append(UInt8(ascii: "}"))
        bytes.append(0x0A)
        return bytes
    }
}
