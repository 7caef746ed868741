import CSodium
import KVOEngine
import KVOModel

/// Short-lived, single-use tickets for the HTTP API's event streams (docs/protocol.md, "HTTP API"): a browser's
/// `EventSource` cannot send `Authorization`, and a token in a URL would reach proxies' and servers' logs. `POST
/// /v1/tickets` with a Bearer token gives a ticket naming its user; `?ticket=` on one stream's URL stands for that
/// token, once, within `lifetime`. Tickets live in memory only (a restart voids them: a client asks again).
///
/// Owned by `Server`; loop thread only. Bounded: at most `capacity` outstanding, the oldest expired ones dropped first
/// and a request for more refused (`rate_limited`).
struct StreamTickets {
    /// How long a ticket is good for.
    static let lifetimeMilliseconds: UInt64 = 30_000
    /// The most tickets outstanding at once (each about 100 bytes).
    static let capacity = 10_000
    /// The most outstanding tickets of one user (so that one user cannot take everyone's room).
    static let capacityPerUser = 100

    private struct Ticket {
        /// The user it stands for; nil in open mode.
        var user: String?
        var expiresAt: UInt64
    }

    private var tickets: [String: Ticket] = [:]
    /// Outstanding tickets per user ("" for open mode's nobody).
    private var perUser: [String: Int] = [:]

    /// A new ticket for `user` at `now` (`ServerClock.milliseconds`), or nil when too many are outstanding.
    mutating func issue(for user: String?, now: UInt64) -> String? {
        if tickets.count >= StreamTickets.capacity || perUser[user ?? "", default: 0] >= StreamTickets.capacityPerUser {
            dropExpired(now: now)
        }
        guard tickets.count < StreamTickets.capacity, perUser[user ?? "", default: 0] < StreamTickets.capacityPerUser else { return nil }
        PasswordHasher.ensureInitialised()
        var bytes = [UInt8](repeating: 0, count: 24)
        randombytes_buf(&bytes, bytes.count)
        let text = "kvodt_" + HexText.encode(bytes)
        tickets[text] = Ticket(user: user, expiresAt: now &+ StreamTickets.lifetimeMilliseconds)
        perUser[user ?? "", default: 0] += 1
        return text
    }

    /// Takes `ticket` (it is used up, valid or not): the user it stands for (`.some(nil)` in open mode), or nil when
    /// it is unknown, used or expired.
    mutating func redeem(_ ticket: String, now: UInt64) -> String?? {
        guard let found = tickets.removeValue(forKey: ticket) else { return nil }
        perUser[found.user ?? "", default: 1] -= 1
        return found.expiresAt > now ? .some(found.user) : nil
    }

    private mutating func dropExpired(now: UInt64) {
        for (text, ticket) in tickets where ticket.expiresAt <= now {
            tickets[text] = nil
            perUser[ticket.user ?? "", default: 1] -= 1
        }
    }
}
