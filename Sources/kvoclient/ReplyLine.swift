import KVOJSON

/// `--json` output: a reply as one line of compact JSON (keys sorted), as the server sent it but for its `id` (the
/// client library's own numbering). Any thread.
enum ReplyLine {
    static func print(_ reply: [String: JSONValue]) {
        var whole = reply
        whole["ok"] = true
        whole["id"] = nil
        Terminal.printLine(DisplayText.json(.object(whole)))
    }
}
