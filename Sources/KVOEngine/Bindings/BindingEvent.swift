import KVOJSON
import KVOModel

/// Something a binding's creator is told: the binding was removed, or a write it made was refused.
///
/// Produced by the engine, delivered by the server to `creator` if it is still connected (and logged).
/// Wire form (docs/protocol.md, "Bindings"):
/// `{"event":"binding","binding":7,"reason":"removed","cause":"sourceDeleted","object":"a","rev":12}` or
/// `{"event":"binding","binding":7,"reason":"refused","error":{"code":…,"message":…},"rev":12}`.
public struct BindingEvent: Equatable, Sendable {
    public enum Reason: Equatable, Sendable {
        /// The binding ended because `object`, one of its sources (`sourceDeleted`) or its target
        /// (`targetDeleted`), was deleted.
        case removed(cause: String, object: String)
        /// A write the binding tried was refused (validation, a broken target path, an expression
        /// error); nothing was written.
        case refused(KVOError)
    }

    public let binding: UInt64
    public let creator: ConnectionID?
    public let reason: Reason
    /// The revision at the time.
    public let rev: UInt64

    /// The event line, newline included.
    public var line: [UInt8] {
        var buffer: [UInt8] = []
        JSONWriter.append("{\"event\":\"binding\",\"binding\":", to: &buffer)
        JSONWriter.writeInteger(Int64(binding), into: &buffer)
        switch reason {
        case let .removed(cause, object):
            JSONWriter.append(",\"reason\":\"removed\",\"cause\":", to: &buffer)
            JSONWriter.writeString(cause, into: &buffer)
            JSONWriter.append(",\"object\":", to: &buffer)
            JSONWriter.writeString(object, into: &buffer)
        case let .refused(error):
            JSONWriter.append(",\"reason\":\"refused\",\"error\":", to: &buffer)
            var members: [String: JSONValue] = error.details
            members["code"] = .string(error.code.rawValue)
            members["message"] = .string(error.message)
            JSONWriter.write(.object(members), into: &buffer)
        }
        JSONWriter.append(",\"rev\":", to: &buffer)
        JSONWriter.writeInteger(Int64(rev), into: &buffer)
        JSONWriter.append("}\n", to: &buffer)
        return buffer
    }

    /// One line for the server's log: client text (object ids, messages quoting values) escaped and cut
    /// short (`PrintableText`), so a client can neither forge log lines nor flood the log.
    public var logDescription: String {
        switch reason {
        case let .removed(cause, object):
            return "binding \(binding) removed: \(cause) (\(PrintableText.escaped(object)))"
        case let .refused(error):
            return "binding \(binding) write refused: \(error.code.rawValue): \(PrintableText.escaped(error.message, limit: 500))"
        }
    }
}
