import KVOEngine
import KVOJSON
import KVOModel

// The write conditions of a request line (docs/protocol.md, "Conditional writes"): looked up only when the
// request's field bits name one (`RequestDecoder.decode`, so a plain write pays one AND), then read and checked.
// They are part of the write's `WriteModifiers` (`Request.modified`). Stateless; any thread.

extension FieldReader {
    /// `ifExists`, `ifAbsent`, `ifEquals` and `ifRev` (docs/protocol.md, "Conditional writes"); nil when the
    /// request carries none.
    func writeConditions() throws(KVOError) -> WriteConditions? {
        var conditions = WriteConditions()
        conditions.unchangedSince = try optionalRevision("ifRev")
        let mustExist = try optionalBool("ifExists")
        let mustBeAbsent = try optionalBool("ifAbsent")
        if mustExist == false || mustBeAbsent == false {
            throw KVOError(.badRequest, "'ifExists' and 'ifAbsent' take true only (leave the field out for no condition)")
        }
        switch (mustExist, mustBeAbsent) {
        case (true?, true?): throw KVOError(.badRequest, "'ifExists' and 'ifAbsent' cannot both hold")
        case (true?, _): conditions.existence = .mustExist
        case (_, true?): conditions.existence = .mustBeAbsent
        default: break
        }
        if let equals = try optionalObject("ifEquals") {
            if let unknown = equals.keys.sorted().first(where: { $0 != "keyPath" && $0 != "value" }) {
                throw KVOError(.badRequest, NameSuggestion.unknownField(unknown, among: ["keyPath", "value"], where: " in 'ifEquals'"),
                               details: ["field": .string("ifEquals." + unknown)])
            }
            guard case let .string(keyPath)? = equals["keyPath"] else {
                throw KVOError(.badRequest, "'ifEquals' needs a 'keyPath' string and a 'value': {\"keyPath\":\"n\",\"value\":1}")
            }
            guard let value = equals["value"] else {
                throw KVOError(.badRequest, "'ifEquals' needs a 'value' (null for a missing key)")
            }
            conditions.equals = WriteConditions.ValueCondition(keyPath: try KeyPath(keyPath), value: value)
        }
        return conditions.isEmpty ? nil : conditions
    }
}
