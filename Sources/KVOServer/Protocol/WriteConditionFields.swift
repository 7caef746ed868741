import KVOEngine
import KVOJSON
import KVOModel

// The write conditions of a request line (docs/protocol.md, "Conditional writes"): found by one pass over the
// member names (`hasConditionMember`, so a plain write pays almost nothing), then read and checked. The decoder
// wraps the write with them (`Request.conditional`). Stateless; any thread.

extension RequestFields {
    /// Whether the request names a write condition (`ifRev`, `ifExists`, `ifAbsent`, `ifEquals`), a `ttl`
    /// and `ephemeral`: one pass over the names by length (3, 5, 8 or 9 bytes; a plain `set`'s only such
    /// member is `value`), comparing whole names only at those lengths.
    var rareWriteMembers: (conditions: Bool, ttl: Bool, ephemeral: Bool) {
        var found: (conditions: Bool, ttl: Bool, ephemeral: Bool) = (false, false, false)
        for member in members {
            let key = member.key
            switch key.utf8.count {
            case 3: if key == "ttl" { found.ttl = true }
            case 5: if key == "ifRev" { found.conditions = true }
            case 8: if key == "ifExists" || key == "ifAbsent" || key == "ifEquals" { found.conditions = true }
            case 9: if key == "ephemeral" { found.ephemeral = true }
            default: continue
            }
        }
        return found
    }
}

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
            guard case let .string(keyPath)? = equals["keyPath"] else {
                throw KVOError(.badRequest, "'ifEquals' needs a 'keyPath' string and a 'value': {\"keyPath\":\"n\",\"value\":1}")
            }
            guard let value = equals["value"] else {
                throw KVOError(.badRequest, "'ifEquals' needs a 'value' (null for a missing key)")
            }
            if let unknown = equals.keys.first(where: { $0 != "keyPath" && $0 != "value" }) {
                throw KVOError(.badRequest, "'ifEquals' has an unknown field '\(PrintableText.escaped(unknown, limit: 64))'")
            }
            conditions.equals = WriteConditions.ValueCondition(keyPath: try KeyPath(keyPath), value: value)
        }
        return conditions.isEmpty ? nil : conditions
    }
}
