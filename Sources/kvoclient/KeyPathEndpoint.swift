import ArgumentParser
import KVOJSON

/// One end of a binding, written `object:keyPath` on the command line (`a:x`, `lab:color.l`) and
/// `{"object":…,"keyPath":…}` on the wire.
///
/// The text is split at its first `:`, so an object id cannot contain one and a key path may. A value
/// type; any thread.
struct KeyPathEndpoint: Equatable, CustomStringConvertible {
    let object: String
    let keyPath: String

    /// Parses `object:keyPath`; both parts must be non-empty. The error is a usage error (exit 2);
    /// ArgumentParser prefixes its message with the value and the argument it was given for.
    init(parsing text: String) throws(ValidationError) {
        guard let colon = text.firstIndex(of: ":") else {
            throw ValidationError("expected OBJECT:KEYPATH, such as 'a:x'")
        }
        let object = String(text[..<colon])
        let keyPath = String(text[text.index(after: colon)...])
        guard !object.isEmpty else { throw ValidationError("the object before ':' is empty") }
        guard !keyPath.isEmpty else { throw ValidationError("the key path after ':' is empty") }
        self.object = object
        self.keyPath = keyPath
    }

    /// Reads the wire form, `{"object":"a","keyPath":"x"}`; nil when either member is missing or not a string.
    init?(json: JSONValue?) {
        guard let object = json?["object"]?.stringValue, let keyPath = json?["keyPath"]?.stringValue else { return nil }
        self.object = object
        self.keyPath = keyPath
    }

    /// The wire form, `{"object":"a","keyPath":"x"}`.
    var json: JSONValue { ["object": .string(object), "keyPath": .string(keyPath)] }

    /// The command-line form, `a:x` (control characters escaped, for printing).
    var description: String { "\(DisplayText.plain(object)):\(DisplayText.plain(keyPath))" }
}
