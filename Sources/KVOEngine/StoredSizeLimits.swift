/// The size limits on what the engine stores, in bytes of compact JSON (what `get` sends and the
/// persistent store writes): a written value, and a whole object (a write over either is refused with
/// `too_large`), and everything stored together (`--max-memory`: a write that would grow the total
/// past it is refused with `quota_exceeded`). A refused write changes nothing. A value type; set once
/// by the server before it serves.
public struct StoredSizeLimits: Sendable, Equatable {
    /// The default largest value of one write (a `set`, each element of an `insert` or `replace`, a
    /// binding's write, the `values` of a `create`): 1 MiB, the default line limit, so that whatever
    /// a binding writes could also have been sent (never more than the object limit).
    public static let defaultMaximumValueBytes = 1 << 20
    /// The default largest object: 15 MiB with the default 32 MiB output buffer (never more than
    /// `largestObject(outputBufferBytes:)` allows).
    public static let defaultMaximumObjectBytes = 15 << 20
    /// What an event adds around its old and new value: the fixed members, the object id and the key
    /// path (ids and key paths longer than this together are not covered).
    public static let eventAllowance = 64 << 10

    public var maximumValueBytes: Int
    public var maximumObjectBytes: Int
    /// The most bytes everything stored may add up to (`KVOEngine.storedBytes`: objects with their
    /// ids, class and binding definitions); `Int.max`, the default, is no limit (`--max-memory 0`).
    public var maximumStoredBytes: Int

    public init(maximumValueBytes: Int = StoredSizeLimits.defaultMaximumValueBytes,
                maximumObjectBytes: Int = StoredSizeLimits.defaultMaximumObjectBytes,
                maximumStoredBytes: Int = .max) {
        self.maximumValueBytes = maximumValueBytes
        self.maximumObjectBytes = maximumObjectBytes
        self.maximumStoredBytes = maximumStoredBytes
    }

    /// The defaults for an output buffer of `outputBufferBytes`: the object limit is 15 MiB or the
    /// largest the buffer allows, whichever is smaller, and the value limit 1 MiB or the object limit.
    public static func defaults(outputBufferBytes: Int) -> StoredSizeLimits {
        let object = max(min(defaultMaximumObjectBytes, largestObject(outputBufferBytes: outputBufferBytes)), 0)
        return StoredSizeLimits(maximumValueBytes: min(defaultMaximumValueBytes, object), maximumObjectBytes: object)
    }

    /// The largest object an output buffer of `outputBufferBytes` can carry as an event's old and new
    /// value: (buffer - `eventAllowance`) / 2.
    public static func largestObject(outputBufferBytes: Int) -> Int {
        (outputBufferBytes - eventAllowance) / 2
    }

    /// No limit (the engine's default when used on its own, in tests and tools).
    public static let unlimited = StoredSizeLimits(maximumValueBytes: .max, maximumObjectBytes: .max, maximumStoredBytes: .max)

    /// Why these limits cannot work with a connection's output buffer of `outputBufferBytes` (nil when
    /// they can): every object kvod accepts must be sendable in one event carrying its old and new value,
    /// `2 x maximumObjectBytes + eventAllowance <= outputBufferBytes`, and a value must fit in an object.
    public func problem(outputBufferBytes: Int) -> String? {
        guard maximumValueBytes > 0, maximumObjectBytes > 0 else {
            return "--max-value-bytes and --max-object-bytes must be positive (is --max-output-buffer above \(2 * StoredSizeLimits.eventAllowance)?)"
        }
        guard maximumValueBytes <= maximumObjectBytes else {
            return "--max-value-bytes (\(maximumValueBytes)) is larger than --max-object-bytes (\(maximumObjectBytes))"
        }
        let largest = StoredSizeLimits.largestObject(outputBufferBytes: outputBufferBytes)
        guard maximumObjectBytes <= largest else {
            return "--max-object-bytes (\(maximumObjectBytes)) is too large for --max-output-buffer (\(outputBufferBytes)): "
                + "an event carrying an object's old and new value needs 2 x --max-object-bytes + \(StoredSizeLimits.eventAllowance) "
                + "bytes of output buffer; lower --max-object-bytes to at most \(max(largest, 0)) or raise --max-output-buffer"
        }
        return nil
    }
}
