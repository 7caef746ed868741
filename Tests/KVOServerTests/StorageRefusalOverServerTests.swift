import Foundation
import KVOJSON
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// Issue 27: the store's health is read at one door, the operations table's. With the store refusing writes
/// (`--max-disk` 1 byte: full from the start), every row whose effect is stored (`.writes`, `.storesSession`) is
/// answered `storage_full`, whatever its route (engine, bindings, user administration, presence), and no other
/// row is; the state does not move.
/// Issue 42: past `--max-disk` (the file system having room) the rows that only remove what is stored (`freesSpace`)
/// are taken, so that room can be made; every other stored row is refused.
/// Walks the rows as declared, so a new write operation is covered without a line added here.
@Suite struct StorageRefusalOverServerTests {
    @Test("with the store full, every write row is refused with storage_full and every other row is not")
    func everyWriteRowIsRefused() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("storage-refusal-\(getpid())-\(UInt64.random(in: 0...UInt64.max))")
        defer { try? FileManager.default.removeItem(at: scratch) }
        var configuration = ServerConfiguration()
        configuration.port = 0
        var storage = StorageConfiguration(directory: scratch.path)
        storage.maximumDiskBytes = 1
        configuration.storage = storage
        let running = try ServerThread(configuration)
        let port = running.port

        let client = try LoopbackClient(port: port)
        var writeRows = 0
        var freeingRows = 0
        for operation in ProtocolOperation.allCases where operation != .auth {
            try client.send(raw: Array(operation.declaration.example.utf8) + [0x0A])
            var reply = try client.readMessage()
            while reply["event"] != nil { reply = try client.readMessage() }
            if operation.declaration.isStored, !operation.declaration.freesSpace {
                writeRows += 1
                expectEqual(reply["error"]?["code"], "storage_full", "\(operation.name) with the store full: \(reply)")
            } else if operation.declaration.isStored {
                freeingRows += 1
                #expect(reply["error"]?["code"] != "storage_full", "\(operation.name) only removes: \(reply)")
            } else {
                #expect(reply["error"]?["code"] != "storage_full", "\(operation.name) is not a write: \(reply)")
            }
        }
        #expect(writeRows >= 10, "only \(writeRows) write rows walked")
        expectEqual(freeingRows, 7, "\(freeingRows) rows that only remove")
        let server = try #require(running.stop(), "the server did not stop").server
        // Read after the loop thread is done with it: nothing was written, nothing was stored.
        expectEqual(server.engine.revision, 0, "a refused write moved the revision")
        expectEqual(server.engine.objectCount, 0)
    }
}
