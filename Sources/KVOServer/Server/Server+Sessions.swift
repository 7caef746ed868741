import CLibUV
import KVOEngine
import KVOJSON
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// What a connection may do as its principal changes: re-checking observations and bindings, open mode ending, compiled policies.
/// Loop thread only, like the rest of `Server`.
extension Server {
    /// After `connection.principal` was replaced (a login, or its user's rules changed): its cached
    /// permission answers are already gone (`ConnectionAccess.replace`); this ends each of its live
    /// observations whose key path now passes through an object it may not read (a final `forbidden`
    /// event, no value), and stops the bindings its user created that the new rules no longer allow
    /// (their creators get the `binding` event, cause `forbidden`). In cluster mode bindings are not
    /// re-checked here: a login happens on one node, and stopping a binding there only would make the
    /// nodes differ (rules do not change online in cluster mode; every node re-checks them at each
    /// application, in stream order). Loop thread; not while a request of this server is being carried out.
    func principalDidChange(of connection: Connection) {
        var ended: [ChangeNotification] = []
        handler.engine.accessChanged(for: connection.id, notifications: &ended)
        if cluster == nil, let user = connection.access.user { handler.engine.recheckBindings(ofUser: user) }
        swap(&ended, &notifications)
        deliverNotifications()
        swap(&ended, &notifications)
        deliverBindingEvents()
    }

    /// Closes `connection` unless it has logged in within `--login-timeout` from now. One whose password
    /// is being checked when its time is up is left to that check (a failure counts toward the limit of 5).
    func addLoginDeadline(for connection: Connection) {
        guard configuration.loginTimeout > 0 else { return }
        deadlines.login.add(connection.id, deadline: ConnectionDeadlines.deadline(configuration.loginTimeout, after: clock.milliseconds))
    }

    /// The first user was added online: open mode is over. Every connection that was let in without
    /// credentials (as new ones no longer are) must now log in: its principal goes, so it is answered
    /// `unauthenticated` until `auth`, and its observations end with a final `forbidden` event.
    func endOpenMode() {
        var anonymous: [Connection] = []
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            if !connection.isClosing, let principal = connection.principal, principal.user == nil { anonymous.append(connection) }
        }
        for connection in anonymous {
            connection.principal = nil
            principalDidChange(of: connection)
            addLoginDeadline(for: connection)
        }
        logger.notice("authentication required from now on (the first user exists); \(anonymous.count) connection\(anonymous.count == 1 ? "" : "s") must log in")
    }

    /// `user`'s current rules, compiled once (nil: no such user). Loop thread.
    package func policy(ofUser user: String) -> AccessPolicy? {
        compiledPolicies.policy(ofUser: user, in: users)
    }

    /// After `user`'s rules changed in the user store (or the user was removed): compiles them again,
    /// gives every open connection acting for the user the new rules (none at all when the user is
    /// gone) and re-checks it (`principalDidChange(of:)`); the user's bindings are re-checked even when
    /// no connection of the user is open. O(open connections). Loop thread; for online grant, revoke
    /// and remove.
    package func policyDidChange(forUser user: String) {
        compiledPolicies.forget(user)
        let policy = self.policy(ofUser: user)
        for case let entry? in slots {
            let connection = entry.takeUnretainedValue()
            guard connection.principal?.user == user else { continue }
            connection.principal = Principal(user: user, policy: policy ?? ConnectionAccess.nobody.policy)
            principalDidChange(of: connection)
        }
        handler.engine.recheckBindings(ofUser: user)
        deliverBindingEvents()
    }
}
