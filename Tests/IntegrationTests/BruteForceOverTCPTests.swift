import Foundation
import KVOWireProbe
import KVOJSON
import Testing

@testable import KVOTestSupport

/// Password guessing against the real kvod over TCP: a client from one address (127.0.0.2) sends wrong
/// passwords, reconnecting each time kvod closes it after 5 failures, while a correct client (from
/// 127.0.0.1) logs in at the same time. Checks are scheduled by fewest recent failures of connection
/// and address, so the guesses never hold up the correct login beyond the checks already running (and
/// checks from addresses that have not logged in lately are bounded: see DistributedGuessingOverTCPTests).
///
/// KVOD_BRUTE_FORCE_ATTEMPTS sets the number of wrong passwords (default 1,000; a longer run: 100000).
@Suite("brute force over TCP")
struct BruteForceOverTCPTests {
    private static var attempts: Int {
        ProcessInfo.processInfo.environment["KVOD_BRUTE_FORCE_ATTEMPTS"].flatMap(Int.init) ?? 1_000
    }

    private func errorCode(_ reply: JSONValue) -> String? { reply["error"]?["code"]?.stringValue }

    @Test("1,000 wrong passwords from one address; a correct client logging in meanwhile is served every time")
    func thousandWrongPasswords() throws {
        let scratch = try TemporaryDirectory("brute")
        let usersFile = scratch.appending("users.json")
        try KVODUserTool.addUser("alice", password: "correct horse", usersFile: usersFile)
        let server = try KVODProcess(["--users", usersFile])
        let port = server.port
        let attempts = Self.attempts
        let attackers = 8
        let results = AttackResults()
        let attack = DispatchGroup()
        for attacker in 0..<attackers {
            DispatchQueue.global().async(group: attack) {
                var sent = 0
                var share = attempts / attackers + (attacker < attempts % attackers ? 1 : 0)
                while share > 0 {
                    do {
                        let connection = try KVOConnection(host: "127.0.0.1", port: port, sourceAddress: "127.0.0.2")
                        let burst = min(5, share)
                        // All five at once: they wait behind each other on the server, in order.
                        var lines = ""
                        for guess in 0..<burst {
                            lines += #"{"op":"auth","id":\#(guess),"user":"alice","password":"guess-\#(attacker)-\#(sent + guess)"}"# + "\n"
                        }
                        try connection.send(raw: Array(lines.utf8))
                        var refused = 0
                        for _ in 0..<burst where (try? connection.readMessage(timeout: 30))?["error"]?["code"] == "unauthenticated" {
                            refused += 1
                        }
                        let closed = burst == 5 ? (try? connection.readLine(timeout: 30)) == nil : true
                        results.record(refused: refused, closedAfterFive: closed)
                        sent += burst
                        share -= burst
                    } catch {
                        results.record(error: "\(error)")
                        return
                    }
                }
            }
        }
        // Meanwhile: correct logins, one after another, until the attack is over.
        var logins = 0
        var slowest = 0.0
        while attack.wait(timeout: .now()) == .timedOut || logins == 0 {
            let started = monotonicSeconds()
            let client = try KVOConnection(host: "127.0.0.1", port: port)
            let reply = try client.call("auth", ["user": "alice", "password": "correct horse"], timeout: 30)
            expectEqual(reply["user"], "alice")
            try client.call("create", ["object": .string("login-\(logins)")])
            slowest = max(slowest, monotonicSeconds() - started)
            logins += 1
        }
        #expect(results.errors.isEmpty, "\(results.errors.prefix(3))")
        expectEqual(results.refused, attempts)
        expectEqual(results.connectionsNotClosed, 0)
        #expect(logins >= 1)
        // Generous: a login waits at most for the checks already running (minimal cost: milliseconds).
        #expect(slowest < 5, "slowest correct login \(slowest) s during \(attempts) wrong passwords")
        print("brute force: \(attempts) wrong passwords refused; \(logins) correct logins meanwhile, slowest \(String(format: "%.3f", slowest)) s")
        // The log says who, without a line per guess.
        #expect(server.log.contains("authentication failed for user 'alice' from 127.0.0.2:"))
        #expect(server.log.components(separatedBy: "authentication failed for").count < attempts / 2)
    }

    @Test("waiting guesses from a failing address go after a login from elsewhere (slow hashes)")
    func failingAddressWaitsBehindOthers() throws {
        let (server, scratch) = try serverWithSlowAliceAndAFailingAddress()
        defer { withExtendedLifetime(scratch) {} }
        // Sixteen guesses at once, from sixteen connections: two run, eight wait (the budget of checks from
        // addresses that have not logged in lately), six are turned away unchecked.
        let guessers = try guesses(16, at: server)
        // They all arrive before the correct login does: a ping on a later connection is answered once kvod has
        // read them (it accepts connections in order and reads them on one loop).
        expectEqual(try KVOConnection(host: "127.0.0.1", port: server.port).call("ping")["ok"], true)
        // Each guess's answer is timestamped by a thread blocked on it, so that how late this thread reads
        // them (a loaded machine can hold it back for longer than a check takes) does not count.
        let arrivals = GuessArrivals()
        let readers = DispatchGroup()
        for guesser in guessers {
            let reader = UncheckedConnection(guesser)
            DispatchQueue.global().async(group: readers) {
                let reply = try? reader.connection.readMessage(timeout: 60)
                arrivals.record(at: monotonicSeconds(), code: reply?["error"]?["code"]?.stringValue,
                                checked: reply?["error"]?["message"] == "wrong user name or password")
            }
        }
        let client = try KVOConnection(host: "127.0.0.1", port: server.port)
        expectEqual(try client.call("auth", ["user": "alice", "password": "correct horse"], timeout: 60)["user"], "alice")
        let loginAnswered = monotonicSeconds()
        readers.wait()
        expectEqual(arrivals.codes, Array(repeating: "unauthenticated", count: 16), "\(arrivals.codes)")
        // How many guesses were checked before the correct login: those already running when it arrived
        // (2), give or take one that started meanwhile; first come, first served would be all that waited.
        // (Those turned away unchecked are answered at once, before it: they cost no check.)
        let answeredBefore = arrivals.countChecked(before: loginAnswered)
        #expect(answeredBefore <= 4, "\(answeredBefore) of 16 guesses were checked before the correct login")
    }
}

extension BruteForceOverTCPTests {
    @Test("past 256 waiting checks the worst-placed are turned away at once, and a login from elsewhere still gets in")
    func queueBoundTurnsAwayTheWorst() throws {
        let (server, scratch) = try serverWithSlowAliceAndAFailingAddress()
        defer { withExtendedLifetime(scratch) {} }
        // 300 guesses at once (interactive cost: 2 run, 256 wait, the rest are turned away).
        let guessers = try guesses(300, at: server)
        // The turned-away are answered at once, the others only after their slow checks: poll every guesser not yet
        // answered until 30 were turned away (a loaded machine may take a while to write them all), 30 s at most.
        var turnedAway = 0
        var answered = Set<Int>()
        let deadline = monotonicSeconds() + 30
        while turnedAway < 30, monotonicSeconds() < deadline {
            for (index, guesser) in guessers.enumerated() where !answered.contains(index) {
                guard let reply = try? guesser.readMessage(timeout: 0.001) else { continue }
                answered.insert(index)
                expectEqual(errorCode(reply), "unauthenticated")
                if reply["error"]?["message"]?.stringValue?.contains("too many logins are waiting") == true { turnedAway += 1 }
            }
        }
        #expect(turnedAway >= 30, "\(turnedAway) of 300 turned away with 256 waiting at most")
        // A login from another address goes ahead of the waiting guesses (one of them is turned away for it).
        let client = try KVOConnection(host: "127.0.0.1", port: server.port)
        expectEqual(try client.call("auth", ["user": "alice", "password": "correct horse"], timeout: 60)["user"], "alice")
        // Closing the guessers drops their waiting checks; the server keeps serving.
        for guesser in guessers { guesser.close() }
        try client.call("create", ["object": "after"])
        #expect(!server.log.contains("critical"))
    }
}

/// When each guess's answer arrived and its error code, recorded by the reader threads under a lock.
private final class GuessArrivals: @unchecked Sendable {
    private let lock = NSLock()
    private var times: [Double] = []
    private var recordedCodes: [String?] = []
    private var wereChecked: [Bool] = []

    /// `checked`: the guess was checked and found wrong (not turned away unchecked).
    func record(at time: Double, code: String?, checked: Bool) {
        lock.lock()
        defer { lock.unlock() }
        times.append(time)
        recordedCodes.append(code)
        wereChecked.append(checked)
    }

    var codes: [String?] {
        lock.lock()
        defer { lock.unlock() }
        return recordedCodes
    }

    func countChecked(before time: Double) -> Int {
        lock.lock()
        defer { lock.unlock() }
        return zip(times, wereChecked).filter { $0.0 < time && $0.1 }.count
    }
}

/// One guesser's connection handed to its reader thread, which alone touches it from then on.
private struct UncheckedConnection: @unchecked Sendable {
    let connection: KVOConnection
    init(_ connection: KVOConnection) { self.connection = connection }
}

/// What the attacking threads saw, gathered under a lock.
private final class AttackResults: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var refused = 0
    private(set) var connectionsNotClosed = 0
    private(set) var errors: [String] = []

    func record(refused count: Int, closedAfterFive: Bool) {
        lock.lock()
        defer { lock.unlock() }
        refused += count
        if !closedAfterFive { connectionsNotClosed += 1 }
    }

    func record(error: String) {
        lock.lock()
        defer { lock.unlock() }
        errors.append(error)
    }
}

extension BruteForceOverTCPTests {
    /// A kvod whose one user, alice ("correct horse"), has a hash of the default (interactive) cost, so
    /// that each check takes about 150 ms and guesses pile up; 127.0.0.2 has already failed once.
    private func serverWithSlowAliceAndAFailingAddress() throws -> (KVODProcess, TemporaryDirectory) {
        let scratch = try TemporaryDirectory("brute")
        let usersFile = scratch.appending("users.json")
        let added = try KVODUserTool.run(["add", "--users", usersFile, "alice", "*=read,write,admin"], password: "correct horse")
        try #require(added.status == 0, "\(added.stderr)")
        let server = try KVODProcess(["--users", usersFile])
        let first = try KVOConnection(host: "127.0.0.1", port: server.port, sourceAddress: "127.0.0.2")
        expectEqual(errorCode(try first.request("auth", ["user": "alice", "password": "nope"], timeout: 30)), "unauthenticated")
        return (server, scratch)
    }

    /// `count` wrong passwords for alice sent at once from 127.0.0.2, one connection each, unanswered yet.
    private func guesses(_ count: Int, at server: KVODProcess) throws -> [KVOConnection] {
        try (0..<count).map { index in
            let connection = try KVOConnection(host: "127.0.0.1", port: server.port, sourceAddress: "127.0.0.2")
            try connection.send(raw: Array((#"{"op":"auth","id":1,"user":"alice","password":"guess-\#(index)"}"# + "\n").utf8))
            return connection
        }
    }
}
