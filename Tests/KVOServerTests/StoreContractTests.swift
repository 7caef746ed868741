import CLibUV
import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The `Store` seam: one behaviour, checked against both stores. What is committed, written or installed
/// comes back from `restore()` after a reopen when the store keeps writes (`SQLiteStore`), and nothing does
/// when it does not (`MemoryStore`, a restart of an in-memory kvod); both accept the same calls, refuse
/// them the same way once closed, and report nothing after an ordinary commit.
@Suite struct StoreContractTests {
    enum Kind: String, CaseIterable, CustomTestStringConvertible {
        case sqlite, memory
        var testDescription: String { rawValue }
    }

    /// A store of `kind` and what it needs to be opened again (a directory for SQLite).
    final class Subject {
        let kind: Kind
        let directory = TemporaryDirectory()
        private(set) var store: any Store

        init(_ kind: Kind) throws {
            self.kind = kind
            store = try Subject.open(kind, directory)
        }

        private static func open(_ kind: Kind, _ directory: TemporaryDirectory) throws -> any Store {
            switch kind {
            case .sqlite:
                return try SQLiteStore(directory: directory.path, sync: .normal, historyLimit: 100, historyByteLimit: 1 << 20)
            case .memory:
                return MemoryStore()
            }
        }

        /// Closes the store and opens it again (a restart), then restores it.
        func reopen() throws -> StoreContents {
            store.close()
            store = try Subject.open(kind, directory)
            return try store.restore()
        }

        deinit { store.close() }
    }

    private static let users = [
        UserRecord(name: "ada", passwordHash: "$argon2id$a"),
        UserRecord(name: "bob", passwordHash: "$argon2id$b"),
    ]

    /// A batch as the engine makes it: two objects, a class, a binding, then a stream sequence and a user.
    private func engineBatch() throws -> CommitBatch {
        let engine = KVOEngine(recordsCommitBatches: true)
        _ = try engine.create("a", ["v": 1])
        _ = try engine.create("b", ["w": 0])
        _ = try engine.bind("a:v", to: "b:w")
        _ = try engine.set("a", "v", 2)
        var batch = engine.takeCommitBatch()
        batch.streamSequence = 9
        batch.users["ada"] = .some(Self.users[0])
        return batch
    }

    private func expectEmpty(_ contents: StoreContents) {
        #expect(contents.state.objects.isEmpty && contents.state.revision == 0 && contents.state.history.isEmpty)
        #expect(contents.state.classes.isEmpty && contents.state.bindings.isEmpty && contents.state.lastBindingID == 0)
        #expect(contents.users.isEmpty && contents.clusterStream == nil && contents.streamSequence == 0)
    }

    @Test(arguments: Kind.allCases)
    func aNewStoreRestoresNothing(kind: Kind) throws {
        let subject = try Subject(kind)
        expectEmpty(try subject.store.restore())
        expectEqual(subject.store.keepsWrites, (kind == .sqlite))
        #expect(subject.store.openingNotes.isEmpty)
    }

    @Test(arguments: Kind.allCases)
    func aGroupCommitComesBackAfterAReopenExactlyWhenTheStoreKeepsWrites(kind: Kind) throws {
        let subject = try Subject(kind)
        let batch = try engineBatch()
        try subject.store.commit(batch)
        let restored = try subject.reopen()
        guard subject.store.keepsWrites else { return expectEmpty(restored) }
        expectEqual(restored.state.revision, batch.revision)
        expectEqual(restored.state.objects, ObjectTable(packing: ["a": ["v": 2], "b": ["w": 2]]))
        expectEqual(restored.state.history.map(\.rev), batch.entries.map(\.rev))
        #expect(restored.state.bindings.count == 1 && restored.state.lastBindingID == batch.lastBindingID)
        expectEqual(restored.streamSequence, 9)
        expectEqual(restored.users.users.map(\.name), ["ada"])
    }

    @Test(arguments: Kind.allCases)
    func usersWrittenOutsideACommitComeBackWhenTheStoreKeepsWrites(kind: Kind) throws {
        let subject = try Subject(kind)
        try subject.store.writeUsers(upserting: Self.users, deleting: [])
        try subject.store.writeUsers(upserting: [], deleting: ["ada"])
        let restored = try subject.reopen()
        expectEqual(restored.users.users.map(\.name), (subject.store.keepsWrites ? ["bob"] : []))
    }

    @Test(arguments: Kind.allCases)
    func theClusterStreamIsRecordedWhenTheStoreKeepsWrites(kind: Kind) throws {
        let subject = try Subject(kind)
        try subject.store.recordClusterStream("orders")
        expectEqual(try subject.reopen().clusterStream, (subject.store.keepsWrites ? "orders" : nil))
    }

    @Test(arguments: Kind.allCases)
    func installingASnapshotReplacesEverythingStoredWhenTheStoreKeepsWrites(kind: Kind) throws {
        let subject = try Subject(kind)
        try subject.store.commit(try engineBatch())
        let source = KVOEngine()
        _ = try source.create("new", ["n": 1])
        let snapshot = ClusterSnapshot(engine: source, users: UserDirectory([Self.users[1]]), sequence: 77)
        try subject.store.replaceAll(with: snapshot.persistedState, streamSequence: 77, streamIntegrity: nil, users: snapshot.users,
                                         sessions: nil)
        let restored = try subject.reopen()
        guard subject.store.keepsWrites else { return expectEmpty(restored) }
        expectEqual(restored.state.objects, ObjectTable(packing: ["new": ["n": 1]]))
        #expect(restored.state.revision == snapshot.revision && restored.state.history.isEmpty)
        #expect(restored.state.bindings.isEmpty && restored.streamSequence == 77)
        expectEqual(restored.users.users.map(\.name), ["bob"])
    }

    @Test(arguments: Kind.allCases)
    func anOrdinaryCommitLeavesNothingToReport(kind: Kind) throws {
        let subject = try Subject(kind)
        var loop = uv_loop_t()
        expectEqual(uv_loop_init(&loop), 0)
        try subject.store.commit(try engineBatch())
        expectEqual(subject.store.afterCommit(on: &loop), nil)
        expectEqual(uv_run(&loop, UV_RUN_NOWAIT), 0, "nothing queued")
        expectEqual(uv_loop_close(&loop), 0)
    }

    @Test(arguments: Kind.allCases)
    func aClosedStoreRefusesEveryCallAndClosesAgainQuietly(kind: Kind) throws {
        let subject = try Subject(kind)
        subject.store.close()
        subject.store.close()
        #expect(throws: StorageError.closed) { try subject.store.restore() }
        #expect(throws: StorageError.closed) { try subject.store.commit(try engineBatch()) }
        #expect(throws: StorageError.closed) { try subject.store.writeUsers(upserting: Self.users, deleting: []) }
        #expect(throws: StorageError.closed) { try subject.store.recordClusterStream("orders") }
        #expect(throws: StorageError.closed) {
            try subject.store.replaceAll(with: PersistedState(), streamSequence: 1, streamIntegrity: nil, users: nil, sessions: nil)
        }
    }
}
