import KVOEngine
import KVOModel

/// What an `auth` request presents: a user name and password, or an API token
/// (docs/protocol.md, "auth"). A value; any thread.
package enum AuthCredentials: Equatable, Sendable {
    case password(user: String, password: String)
    case token(String)
}
