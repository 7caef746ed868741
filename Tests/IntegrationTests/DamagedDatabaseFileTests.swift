import Foundation
import Testing

@testable import KVOTestSupport

/// Issue 27: a database file damaged as a file (not a row) refuses the start with the file's path and what is
/// wrong with it, never SQLite's bare "database disk image is malformed" (SQLite error 11), which named neither.
@Suite("damaged database file over TCP")
struct DamagedDatabaseFileTests {
    /// One damage done to a healthy database file, and the words the refusal must carry after the path.
    enum FileDamage: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Every byte replaced with garbage (no SQLite header).
        case garbage
        /// Cut to its first half: the header counts pages the file no longer has.
        case truncated
        /// The first page (header and schema) kept, every later page overwritten with garbage.
        case overwritten

        var testDescription: String { rawValue }

        var expected: String {
            switch self {
            case .garbage: "it is not a SQLite database"
            case .truncated, .overwritten: "it is damaged (malformed"
            }
        }

        /// The damaged bytes of `healthy`.
        func apply(to healthy: Data) -> Data {
            let garbage = Data((0..<healthy.count).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) })
            switch self {
            case .garbage: return garbage
            case .truncated: return healthy.prefix(healthy.count / 2)
            case .overwritten: return healthy.prefix(4096) + garbage.dropFirst(4096)
            }
        }
    }

    @Test("a damaged database file refuses the start naming the file and what is wrong", arguments: FileDamage.allCases)
    func damagedFileRefusesStart(damage: FileDamage) throws {
        let directory = try TemporaryDirectory("damaged-file")
        let store = try CorruptStoreTests.healthyStore(directory)
        let healthy = try Data(contentsOf: URL(fileURLWithPath: store.database))
        #expect(healthy.count >= 4 * 4096, "a database of several pages: \(healthy.count) bytes")
        try damage.apply(to: healthy).write(to: URL(fileURLWithPath: store.database))
        do {
            let server = try KVODProcess(dataDirectory: store.data)
            server.stop()
            Issue.record("kvod started over a damaged database file (\(damage.rawValue))")
        } catch let KVODProcessError.exitedEarly(status, log) {
            expectEqual(status, 1, "exit status \(status): \(log)")
            #expect(log.contains("cannot start: storage: cannot use the database '\(store.database)': \(damage.expected)"), "\(log)")
            #expect(!log.contains("Fatal error"), "\(log)")
        }
    }
}
