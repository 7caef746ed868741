import KVOEngine
import KVOJSON

/// Upper bounds on the size of event lines before they are encoded (`JSONSizeBound` for events): lets
/// `observe` refuse an initial value, a `resync` or a history replay that would not fit in the
/// connection's output buffer, without encoding it. The bound is the full encoding's; a compact event
/// (`EventEncoding.compact`) carries the same values with fewer bytes around them, so it holds for both.
///
/// Pure functions: any thread.
enum EventSizeBound {
    /// Room for an event's fixed text: the head, the subscription id, `reason`, `rev`, `kind`, `prior`
    /// and the member names and punctuation.
    static let fixedBytes = 200

    /// Whether the events for `notifications`, one recipient each, take at most `budget` bytes
    /// (counting `old` and `new` whatever the recipient's options). Stops as soon as they do not.
    static func fits(_ notifications: [ChangeNotification], budget: Int) -> Bool {
        var total = 0
        for notification in notifications {
            total += fixedBytes + 21 * (notification.indexes?.count ?? 0)
            guard total <= budget,
                  JSONSizeBound.addString(notification.object, to: &total, limit: budget),
                  JSONSizeBound.addString(notification.keyPath, to: &total, limit: budget),
                  JSONSizeBound.add(notification.old, to: &total, limit: budget),
                  JSONSizeBound.add(notification.new, to: &total, limit: budget)
            else { return false }
        }
        return true
    }
}
