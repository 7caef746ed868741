import KVOEngine
import KVOModel

/// How a connection's change events are written (docs/protocol.md, "Events" and "Compact events"):
/// chosen with `hello`'s `events`; `full` until then.
///
/// A value type: any thread. Each observation keeps the encoding in force when it was made
/// (`ObservationOptions.compactEvents`); a later `hello` changes only the observations made after it.
package enum EventEncoding: String, Sendable, Equatable {
    /// `{"event":"change","sub":…,"object":…,"keyPath":…,"reason":…,"rev":…,"change":{…}}`: the default.
    case full
    /// `{"s":…,"r":…,"n":…}`: what the subscriber knows from its `observe` left out, defaults left out.
    case compact

    /// The names a client may send, for error messages.
    static let names = "\"full\" or \"compact\""
}
