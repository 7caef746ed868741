import KVOJSON

/// Requests stored by a kvod from before strict requests (issue 41), read back by this one: `onDisconnect`
/// actions are kept as their client sent them, and a kvod of that time took `null` for any optional member as
/// "absent". This one refuses such a member (docs/protocol.md, "Requests and replies"), so a stored action
/// sent with `"ttl": null` would fail when its session ends, after the server had acknowledged it. Restoring
/// sessions (`Server.restoreSessions`) rewrites such an action with those members left out, which is what
/// it meant when it was accepted.
///
/// Left alone: `value`, whose `null` is a value (`set`, `insert`, `replace`, and `ifEquals`), and every member
/// inside it or inside `values`, which are the user's data. Looked into: the request object, its `ifEquals`
/// (an object or an array of them) and a batch's `requests`. A value type; no state.
enum LegacyNullMembers {
    /// `line` without the `null` members an older kvod read as absent; nil when it has none (or is no object).
    static func removed(from line: [UInt8]) -> [UInt8]? {
        guard let request = try? JSONParser.parse(line), case .object = request else { return nil }
        let cleaned = removingNulls(request)
        return cleaned == request ? nil : JSONWriter.bytes(cleaned)
    }

    /// Members into which the rewrite looks (the others are left as they are).
    private static let nested: Set<String> = ["ifEquals", "requests"]

    private static func removingNulls(_ value: JSONValue) -> JSONValue {
        switch value {
        case let .object(members):
            var kept: [String: JSONValue] = [:]
            for (key, member) in members {
                if member == .null, key != "value" { continue }
                kept[key] = nested.contains(key) ? removingNulls(member) : member
            }
            return .object(kept)
        case let .array(elements):
            return .array(elements.map(removingNulls))
        default:
            return value
        }
    }
}
