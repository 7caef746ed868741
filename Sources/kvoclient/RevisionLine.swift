import KVOJSON

/// The output of the commands that change state: `rev N`, the revision the change created.
enum RevisionLine {
    /// Prints `rev N` from a `create`, `set` or `delete` reply.
    static func print(_ reply: [String: JSONValue]) throws(CLIError) {
        guard let rev = reply["rev"]?.intValue else { throw .unexpectedReply(JSONValue.object(reply).description) }
        print(rev)
    }

    /// Prints `rev N` for the revision a typed client call returned.
    static func print(_ rev: Int64) {
        Terminal.printLine("rev \(rev)")
    }
}
