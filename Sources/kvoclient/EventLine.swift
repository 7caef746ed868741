import KVOJSON

/// The human-readable form of a change event, one line per event.
///
/// ```
/// <object>.<keyPath>  <reason>  [prior]  rev=<rev>  [kind=<kind>  indexes=<json>]  [old=<json>]  [new=<json>]
/// ```
///
/// Fields are separated by two spaces; values are compact JSON, so strings keep their quotes and
/// `null` means a missing key. `prior` marks a prior notification (sent before the change when the
/// `prior` option was asked). `kind` is left out for settings (kind 1) and named for the array
/// changes: `insertion` (2), `removal` (3), `replacement` (4), followed by the indexes. Any other
/// member of the change dictionary follows as `key=<json>`. For example:
///
/// ```
/// clock.date  initial  rev=1  new="2026-11-20"
/// clock.date  valueChanged  prior  rev=2  old="2026-11-20"
/// clock.date  valueChanged  rev=2  old="2026-11-20"  new="2026-11-21"
/// todo.items  valueChanged  rev=3  kind=insertion  indexes=[1]  new=["milk"]
/// clock.date  sourceDeleted  rev=4  old="2026-11-21"  new=null
/// sess:1  sourceDeleted  expired  rev=7
/// ```
///
/// An ending with a `cause` (an object whose time to live ended) names it after the reason.
enum EventLine {
    /// The change-dictionary keys that have a fixed place in the line.
    private static let placedKeys: Set<String> = ["kind", "indexes", "new", "old", "notificationIsPrior"]

    /// Apple's NSKeyValueChange names for the kinds other than setting.
    private static let kindNames: [Int64: String] = [2: "insertion", 3: "removal", 4: "replacement"]

    /// Formats one event message.
    static func format(_ event: JSONValue) -> String {
        let change = event["change"]?.objectValue ?? [:]
        // An id-set pattern observation's events follow no key path: the object alone.
        var fields = [
            event["keyPath"] == nil && event["object"] != nil
                ? text(event["object"]) : "\(text(event["object"])).\(text(event["keyPath"]))",
            text(event["reason"]),
        ]
        if let cause = event["cause"] { fields.append(text(cause)) }
        if change["notificationIsPrior"] == .bool(true) { fields.append("prior") }
        fields.append("rev=\(text(event["rev"]))")
        if let kind = change["kind"], kind != .int(1) {
            fields.append("kind=\(kind.intValue.flatMap { kindNames[$0] } ?? DisplayText.json(kind))")
        }
        if let indexes = change["indexes"] { fields.append("indexes=\(DisplayText.json(indexes))") }
        if let old = change["old"] { fields.append("old=\(DisplayText.json(old))") }
        if let new = change["new"] { fields.append("new=\(DisplayText.json(new))") }
        for key in change.keys.sorted() where !placedKeys.contains(key) {
            fields.append("\(DisplayText.plain(key))=\(DisplayText.json(change[key]!))")
        }
        return fields.joined(separator: "  ")
    }

    /// A string without quotes, anything else as JSON, `?` when missing; escaped for the terminal.
    private static func text(_ value: JSONValue?) -> String {
        guard let value else { return "?" }
        return DisplayText.text(value)
    }
}
