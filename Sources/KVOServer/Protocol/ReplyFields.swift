import KVOJSON

/// The members of a success reply after `id` and `ok`, in order (`ReplyEncoder.success`).
///
/// The reply to every write is `{"rev":R}`: held as the revision alone (`revision(_:)`), it costs no array
/// and is written straight from the number (issue 28: making, checking and freeing a one-element array of
/// tuples was about 600 instructions of a `set`). Any other reply is a list of named values. A value type;
/// any thread.
package struct ReplyFields: RandomAccessCollection, ExpressibleByArrayLiteral, Sendable {
    private enum Storage: Sendable {
        case revision(UInt64)
        case list([(String, JSONValue)])
    }

    private let storage: Storage

    /// `{"rev":rev}`.
    package static func revision(_ rev: UInt64) -> ReplyFields {
        ReplyFields(storage: .revision(rev))
    }

    private init(storage: Storage) {
        self.storage = storage
    }

    package init(_ list: [(String, JSONValue)]) {
        storage = .list(list)
    }

    package init(arrayLiteral elements: (String, JSONValue)...) {
        storage = .list(elements)
    }

    /// The revision, when the reply is exactly `{"rev":R}` held as `revision(_:)`.
    package var onlyRevision: UInt64? {
        if case let .revision(rev) = storage { return rev }
        return nil
    }

    package var startIndex: Int { 0 }

    package var endIndex: Int {
        switch storage {
        case .revision: return 1
        case let .list(list): return list.count
        }
    }

    package subscript(position: Int) -> (String, JSONValue) {
        switch storage {
        case let .revision(rev):
            precondition(position == 0, "ReplyFields: index out of range")
            return ("rev", .int(Int64(truncatingIfNeeded: rev)))
        case let .list(list):
            return list[position]
        }
    }
}
