import KVOJSON
import KVOModel
import Testing
@testable import KVOServer

/// `SessionTable` on its own (docs/protocol.md, "Presence", "Limits"): each limit refuses `too_large` with
/// its number and changes nothing; detaching, resuming and ending keep the indexes straight; stored records
/// read back whole. The behaviour over TCP is `PresenceOverTCPTests`'.
@Suite struct SessionTableTests {
    private func connection(_ number: UInt64) -> ConnectionID { ConnectionID(number, slot: UInt32(number)) }

    @Test func aUserHoldsAtMostItsShareOfSessions() throws {
        var table = SessionTable(recordsChanges: true)
        for number in 1...UInt64(SessionLimits.maximumSessionsPerUser) {
            _ = try table.begin(user: "mallory", grace: 0, connection: connection(number))
        }
        do {
            _ = try table.begin(user: "mallory", grace: 0, connection: connection(9_999))
            Issue.record("past the limit of sessions per user")
        } catch {
            #expect(error.code == .tooLarge && error.details["limit"] == .int(Int64(SessionLimits.maximumSessionsPerUser)))
        }
        expectEqual(table.count, SessionLimits.maximumSessionsPerUser)
        // Another user is not held back by mallory's sessions; an ended session gives mallory room again.
        _ = try table.begin(user: "ann", grace: 0, connection: connection(10_000))
        let first = try #require(table.sessionID(of: connection(1)))
        _ = table.end(first)
        _ = try table.begin(user: "mallory", grace: 0, connection: connection(9_999))
    }

    @Test func actionsAndEphemeralObjectsAreBoundedPerSession() throws {
        var table = SessionTable(recordsChanges: true)
        let owner = connection(1)
        let session = try table.begin(user: nil, grace: 1000, connection: owner)
        let line = Array(#"{"op":"delete","object":"o"}"#.utf8)
        for _ in 0..<SessionLimits.maximumActionsPerSession { _ = try table.addAction(line, connection: owner, user: nil) }
        do {
            _ = try table.addAction(line, connection: owner, user: nil)
            Issue.record("past the limit of actions")
        } catch {
            expectEqual(error.code, .tooLarge)
        }
        expectEqual(table.totalActionBytes, SessionLimits.maximumActionsPerSession * line.count)
        expectEqual(try table.cancelActions(nil, connection: owner, user: nil), SessionLimits.maximumActionsPerSession)
        expectEqual(table.totalActionBytes, 0)
        for index in 0..<SessionLimits.maximumEphemeralObjectsPerSession {
            _ = try table.admitEphemeral(from: owner, user: nil)
            let added = table.addEphemeral("e\(index)", to: session.id)
            #expect(added)
        }
        do {
            _ = try table.admitEphemeral(from: owner, user: nil)
            Issue.record("past the limit of ephemeral objects")
        } catch {
            expectEqual(error.code, .tooLarge)
        }
        let again = table.addEphemeral("e0", to: session.id)
        #expect(!again, "an object belongs to one session once")
        table.objectRemoved("e0")
        expectEqual(try table.admitEphemeral(from: owner, user: nil), session.id, "a deleted ephemeral object frees its place")
    }

    @Test func oneUserCannotFillTheServersRoomForActions() throws {
        var table = SessionTable(recordsChanges: true)
        let line = [UInt8](repeating: 0x20, count: SessionLimits.maximumActionBytes)
        let perUser = SessionLimits.maximumActionBytesPerUser / line.count
        var number: UInt64 = 0
        var added = 0
        var refusal: KVOError?
        while refusal == nil {
            number += 1
            _ = try table.begin(user: "mallory", grace: 0, connection: connection(number))
            for _ in 0..<SessionLimits.maximumActionsPerSession {
                do {
                    _ = try table.addAction(line, connection: connection(number), user: "mallory")
                    added += 1
                } catch {
                    refusal = error
                    break
                }
            }
        }
        #expect(added == perUser && refusal?.details["limit"] == .int(Int64(SessionLimits.maximumActionBytesPerUser)))
        expectEqual(table.totalActionBytes, perUser * line.count)
        // Another user still has room; ending mallory's sessions gives the bytes back.
        _ = try table.begin(user: "ann", grace: 0, connection: connection(100_000))
        _ = try table.addAction(line, connection: connection(100_000), user: "ann")
        for session in 1...number { if let id = table.sessionID(of: connection(session)) { _ = table.end(id) } }
        expectEqual(table.totalActionBytes, line.count)
        _ = try table.begin(user: "mallory", grace: 0, connection: connection(number + 1))
        _ = try table.addAction(line, connection: connection(number + 1), user: "mallory")
    }

    @Test func detachingResumingAndEndingKeepTheIndexesStraight() throws {
        var table = SessionTable(recordsChanges: true)
        let session = try table.begin(user: "ann", grace: 500, connection: connection(1))
        #expect(!table.hasDetached)
        table.detach(connection(1), now: 1_000)
        #expect(table.hasDetached && table.sessionID(of: connection(1)) == nil)
        #expect(table.due(now: 1_499).isEmpty && table.due(now: 1_500) == [session.id])
        do {
            _ = try table.resume(session.id, user: "bob", connection: connection(2), grace: nil)
            Issue.record("another user resumed it")
        } catch {
            expectEqual(error.code, .notFound)
        }
        let (resumed, takenFrom) = try table.resume(session.id, user: "ann", connection: connection(2), grace: nil)
        #expect(resumed.deadline == nil && takenFrom == nil && !table.hasDetached)
        let (_, previous) = try table.resume(session.id, user: "ann", connection: connection(3), grace: 0)
        #expect(previous == connection(2) && table.sessionID(of: connection(2)) == nil)
        table.detach(connection(2), now: 5_000)
        #expect(!table.hasDetached, "the connection it was taken from no longer holds it")
        table.uncommitted.removeAll()
        let ending = table.end(session.id)
        let ended = try #require(ending)
        #expect(ended.id == session.id && table.isEmpty && table.uncommitted == [session.id])
        expectEqual(table.sessionID(of: connection(3)), nil)
        do {
            _ = try table.resume(session.id, user: "ann", connection: connection(4), grace: nil)
            Issue.record("an ended session was resumed")
        } catch {
            expectEqual(error.code, .notFound)
        }
    }

    @Test func aStoredRecordReadsBackWhole() throws {
        var table = SessionTable(recordsChanges: true)
        let owner = connection(1)
        let session = try table.begin(user: "ann", grace: 2500, connection: owner)
        _ = try table.addAction(Array(#"{"keyPath":"n","object":"o","op":"set","value":{"a":[1,2.5,"x"]}}"#.utf8), connection: owner, user: "ann")
        _ = try table.addAction(Array(#"{"object":"o","op":"delete"}"#.utf8), connection: owner, user: "ann")
        _ = try table.cancelActions(1, connection: owner, user: "ann")
        _ = table.addEphemeral("cursor", to: session.id)
        let stored = try #require(table.session(session.id))
        let record = try JSONParser.parse(JSONWriter.bytes(stored.record))
        let back = try #require(PresenceSession(id: session.id, record: record))
        #expect(back.actions == stored.actions && back.ephemeralObjects == ["cursor"] && back.nextActionID == 3)
        #expect(back.user == "ann" && back.grace == 2500 && back.connection == nil)
        expectEqual(PresenceSession(id: "not-an-id", record: record), nil)
        expectEqual(PresenceSession(id: session.id, record: ["grace": -1, "next": 1, "actions": [], "ephemeral": []]), nil)
        // Read back after a restart: detached, ending after its grace.
        var restarted = SessionTable(recordsChanges: true)
        restarted.restore([back], now: 10_000)
        #expect(restarted.due(now: 12_499).isEmpty && restarted.due(now: 12_500) == [session.id])
        #expect(restarted.watchedObjectIDs == ["cursor"])
    }

    @Test func anInMemoryServerCollectsNoChanges() throws {
        var table = SessionTable(recordsChanges: false)
        let session = try table.begin(user: nil, grace: 0, connection: connection(1))
        _ = try table.addAction([0x7B, 0x7D], connection: connection(1), user: nil)
        _ = table.end(session.id)
        #expect(table.uncommitted.isEmpty)
    }
}
