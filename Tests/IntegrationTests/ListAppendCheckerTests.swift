import Testing

/// `ListAppendChecker` on hand-made histories: a valid one passes, and each anomaly the randomized fault
/// test (ClusterRandomFaultTests) looks for is found when one is put in, with the kinds it implies.
@Suite("list-append checker")
struct ListAppendCheckerTests {
    typealias History = ListAppendHistory
    typealias Kind = ListAppendChecker.AnomalyKind

    /// Two clients on n1 and n2 append to lists l0 and l1 and set register r0. w0-2 was answered
    /// `unavailable` ("may still be applied") and was applied at rev 5; w1-1 was answered "not made" and
    /// w1-2 refused, and neither was applied. A read on n2 waited for w0-0, one on n3 for w0-1; observers on
    /// n1 (which reconnected once) and n2 heard every insertion, the one on n3 began with a resync.
    static func valid() -> History {
        func op(_ client: Int, _ kind: History.Kind, _ object: String, _ value: String, _ invoked: Double, _ completed: Double,
                _ outcome: History.Outcome) -> History.Operation {
            History.Operation(client: client, node: client, kind: kind, object: object, value: value, invoked: invoked,
                              completed: completed, outcome: outcome)
        }
        let operations = [
            op(0, .append, "l0", "w0-0", 1.0, 1.1, .ok(rev: 2)),
            op(1, .append, "l0", "w1-0", 1.05, 1.2, .ok(rev: 3)),
            op(0, .set, "r0", "w0-1", 1.2, 1.3, .ok(rev: 4)),
            op(0, .append, "l0", "w0-2", 1.4, 6.4, .indeterminate(reason: "unavailable: it may still be applied", notMade: false)),
            op(1, .append, "l0", "w1-1", 1.3, 6.3, .indeterminate(reason: "unavailable: the write was not made", notMade: true)),
            op(1, .append, "l0", "w1-2", 6.35, 6.4, .failed(code: "quota_exceeded")),
            op(1, .set, "r0", "w1-3", 6.5, 6.6, .ok(rev: 6)),
            op(0, .append, "l1", "w0-3", 6.7, 6.8, .ok(rev: 7)),
            op(0, .append, "l0", "w0-4", 6.9, 7.0, .ok(rev: 8)),
        ]
        let finals = (0..<3).map {
            History.FinalState(node: $0, lists: ["l0": ["w0-0", "w1-0", "w0-2", "w0-4"], "l1": ["w0-3"]], registers: ["r0": "w1-3"],
                               digest: "d8", rev: 8)
        }
        let reads = [
            History.Read(node: 1, object: "l0", expectedValue: "w0-0", atLeastRev: 2, rev: 3,
                         result: .list(count: 2, hash: History.prefixHash(["w0-0", "w1-0"]), sawExpected: true)),
            History.Read(node: 2, object: "r0", expectedValue: "w0-1", atLeastRev: 4, rev: 5, result: .register("w0-1")),
            History.Read(node: 0, object: "l1", expectedValue: "w0-3", atLeastRev: 7, rev: 7, result: .failed("unavailable")),
        ]
        let live: [History.ObserverEvent] = [
            .insert(rev: 2, object: "l0", index: 0, values: ["w0-0"]),
            .insert(rev: 3, object: "l0", index: 1, values: ["w1-0"]),
            .insert(rev: 5, object: "l0", index: 2, values: ["w0-2"]),
            .insert(rev: 7, object: "l1", index: 0, values: ["w0-3"]),
            .insert(rev: 8, object: "l0", index: 3, values: ["w0-4"]),
        ]
        var resumed = live
        resumed.insert(.resumed(sinceRev: 3), at: 2)
        let observers = [
            History.ObserverLog(node: 0, events: resumed),
            History.ObserverLog(node: 1, events: live),
            History.ObserverLog(node: 2, events: [.resync(rev: 5, object: "l0", values: ["w0-0", "w1-0", "w0-2"]),
                                                  .resync(rev: 5, object: "l1", values: [])] + live.suffix(2)),
        ]
        return History(operations: operations, reads: reads, observers: observers, finals: finals)
    }

    /// The kinds of anomaly the checker finds in `valid()` changed by `change`.
    private func kinds(_ change: (inout History) -> Void) -> Set<Kind> {
        var history = ListAppendCheckerTests.valid()
        change(&history)
        let report = ListAppendChecker.check(history)
        return Set(report.anomalies.map(\.kind))
    }

    private func setOutcome(_ value: String, _ outcome: History.Outcome, in history: inout History) {
        let index = history.operations.firstIndex { $0.value == value }!
        history.operations[index].outcome = outcome
    }

    @Test("a valid history has no anomalies, and its statistics count each outcome")
    func validHistoryPasses() {
        let report = ListAppendChecker.check(ListAppendCheckerTests.valid())
        #expect(report.anomalies.isEmpty, "\(report.summary())")
        #expect(report.summary() == "no anomalies")
        let statistics = report.statistics
        #expect(statistics.operations == 9)
        #expect(statistics.acknowledged == 6)
        #expect(statistics.indeterminate == 2)
        #expect(statistics.notMade == 1)
        #expect(statistics.failed == 1)
        #expect(statistics.indeterminateApplied == 1)
        #expect(statistics.reads == 3 && statistics.readsFailed == 1)
        #expect(statistics.observerResumes == 1 && statistics.observerResyncs == 2)
    }

    @Test("a final list: an acknowledged append lost, a value twice or never sent, a refused or 'not made' write applied")
    func finalListAnomalies() {
        #expect(kinds { $0.finals[2].lists["l0"] = ["w0-0", "w0-2", "w0-4"] } == [.lostAppend, .divergence])
        #expect(kinds { $0.finals[2].lists["l0"]!.append("w0-2") } == [.duplicateValue, .divergence])
        #expect(kinds { $0.finals[2].lists["l1"] = ["w0-3", "w9-9"] } == [.unattemptedValue, .divergence])
        // A value appended to l0 found in l1 too: twice, and never sent to l1.
        #expect(kinds { $0.finals[2].lists["l1"] = ["w0-3", "w0-0"] } == [.duplicateValue, .unattemptedValue, .divergence])
        #expect(kinds { $0.finals[2].lists["l0"]!.append("w1-2") } == [.failedWriteApplied, .divergence])
        #expect(kinds { $0.finals[2].lists["l0"]!.append("w1-1") } == [.notMadeWriteApplied, .divergence])
        // A list lost whole.
        #expect(kinds { $0.finals[1].lists["l1"] = nil } == [.lostAppend, .divergence])
    }

    @Test("order: a client's appends swapped, a list out of revision order, a revision given twice, real time broken")
    func orderAnomalies() {
        // w0-0 and w0-4 are client 0's acknowledged appends to l0.
        #expect(kinds { $0.finals[2].lists["l0"] = ["w0-4", "w1-0", "w0-2", "w0-0"] } == [.clientOrder, .listRevisionOrder, .divergence])
        // w0-0 (rev 2) and w1-0 (rev 3) are two clients' overlapping appends: only their revisions say which is first.
        #expect(kinds { $0.finals[2].lists["l0"] = ["w1-0", "w0-0", "w0-2", "w0-4"] } == [.listRevisionOrder, .divergence])
        // w0-3 acknowledged with w1-3's revision (the observers heard it at rev 7).
        #expect(kinds { setOutcome("w0-3", .ok(rev: 6), in: &$0) } == [.duplicateRevision, .observerRevision])
        // w1-3 (rev 6) sent at t=7.1, after w0-3 was acknowledged with rev 7 at t=6.8.
        #expect(kinds { history in
            let index = history.operations.firstIndex { $0.value == "w1-3" }!
            history.operations[index].invoked = 7.1
            history.operations[index].completed = 7.2
        } == [.realTimeOrder])
    }

    @Test("nodes that differ: digest, revision, a register")
    func divergence() {
        #expect(kinds { $0.finals[1].digest = "other" } == [.divergence])
        #expect(kinds { $0.finals[1].rev = 9 } == [.divergence])
        #expect(kinds { $0.finals[1].registers["r0"] = "w0-1" } == [.registerFinal, .divergence])
    }

    @Test("a register ending with an older acknowledged value, null, a value never set or refused")
    func registerFinalAnomalies() {
        #expect(kinds { history in for index in 0..<3 { history.finals[index].registers["r0"] = "w0-1" } } == [.registerFinal])
        #expect(kinds { history in for index in 0..<3 { history.finals[index].registers["r0"] = nil } } == [.registerFinal])
        #expect(kinds { history in for index in 0..<3 { history.finals[index].registers["r0"] = "w0-0" } } == [.unattemptedValue])
        #expect(kinds { history in
            history.operations.append(History.Operation(client: 1, node: 1, kind: .set, object: "r0", value: "w1-9", invoked: 7.5,
                                                         completed: 7.6, outcome: .failed(code: "forbidden")))
            for index in 0..<3 { history.finals[index].registers["r0"] = "w1-9" }
        } == [.failedWriteApplied])
        // An indeterminate set may end up last.
        #expect(kinds { history in
            history.operations.append(History.Operation(client: 1, node: 1, kind: .set, object: "r0", value: "w1-9", invoked: 7.5,
                                                         completed: 12.5, outcome: .indeterminate(reason: "timed out", notMade: false)))
            for index in 0..<3 { history.finals[index].registers["r0"] = "w1-9" }
        }.isEmpty)
    }

    @Test("reads with atLeastRev: the awaited write missing, not a prefix, too new or too old, a stale register")
    func readAnomalies() {
        let prefix2 = History.prefixHash(["w0-0", "w1-0"])
        #expect(kinds { $0.reads[0].result = .list(count: 2, hash: prefix2, sawExpected: false) } == [.readYourWrites])
        #expect(kinds { $0.reads[0].result = .list(count: 2, hash: History.prefixHash(["w1-0", "w0-0"]), sawExpected: true) } == [.readNotPrefix])
        #expect(kinds { $0.reads[0].result = .list(count: 5, hash: prefix2, sawExpected: true) } == [.readNotPrefix])
        // At rev 2 the list cannot hold w1-0 (acknowledged with rev 3).
        #expect(kinds { $0.reads[0].rev = 2 } == [.readRevision])
        // At rev 3 it must hold w1-0.
        #expect(kinds { $0.reads[0].result = .list(count: 1, hash: History.prefixHash(["w0-0"]), sawExpected: true) } == [.readRevision])
        // At rev 7, r0 was w1-3 (rev 6), not w0-1 (rev 4).
        #expect(kinds { $0.reads[1].rev = 7 } == [.staleRegisterRead])
        #expect(kinds { $0.reads[1].result = .register(nil) } == [.readYourWrites])
        #expect(kinds { $0.reads[1].result = .register("w7-7") } == [.unattemptedValue])
        #expect(kinds { $0.reads[1].result = .register("w1-3") } == [.readRevision])
        #expect(kinds { history in
            history.reads.append(History.Read(node: 0, object: "r0", expectedValue: "w1-3", atLeastRev: 6, rev: 6, result: .register("w0-1")))
        } == [.readYourWrites])
    }

    @Test("observers: a gap, a repeat, out of order, a resync going back, another revision, disagreeing, an odd event")
    func observerAnomalies() {
        #expect(kinds { $0.observers[1].events.remove(at: 1) } == [.observerGap, .observerFinal])
        // w1-0 heard twice (the same event repeated).
        #expect(kinds { $0.observers[1].events.insert(.insert(rev: 3, object: "l0", index: 1, values: ["w1-0"]), at: 2) }
            == [.observerOrder, .observerGap])
        // w1-0 heard again later, at another revision and index.
        #expect(kinds { $0.observers[1].events.insert(.insert(rev: 4, object: "l0", index: 1, values: ["w1-0"]), at: 2) }
            == [.observerGap, .observerRevision, .observerDisagreement])
        #expect(kinds { $0.observers[1].events.swapAt(2, 3) } == [.observerOrder])
        #expect(kinds { $0.observers[2].events.insert(.resync(rev: 6, object: "l0", values: ["w0-0"]), at: 2) }
            == [.observerGap, .observerFinal])
        // All three hear w1-0 at rev 4: they agree, but it was acknowledged with rev 3.
        #expect(kinds { history in
            for index in 0..<2 {
                let position = history.observers[index].events.firstIndex(of: .insert(rev: 3, object: "l0", index: 1, values: ["w1-0"]))!
                history.observers[index].events[position] = .insert(rev: 4, object: "l0", index: 1, values: ["w1-0"])
            }
        } == [.observerRevision])
        // w0-2 (indeterminate, so no acknowledged revision) heard at rev 6 on n2 and rev 5 on n1.
        #expect(kinds { history in
            let position = history.observers[1].events.firstIndex(of: .insert(rev: 5, object: "l0", index: 2, values: ["w0-2"]))!
            history.observers[1].events[position] = .insert(rev: 6, object: "l0", index: 2, values: ["w0-2"])
        } == [.observerDisagreement])
        // Two observers hearing different values at one revision.
        #expect(kinds { history in
            history.observers[1].events[3] = .insert(rev: 7, object: "l1", index: 0, values: ["w0-2"])
        }.isSuperset(of: [.observerDisagreement, .observerFinal]))
        #expect(kinds { $0.observers[0].events.append(.unexpected(#"{"event":"change","reason":"sourceDeleted"}"#)) } == [.observerEvent])
    }

    @Test("an incident the fault schedule saw is an anomaly")
    func incident() {
        #expect(kinds { $0.incidents.append("n2 exited with status 65") } == [.incident])
    }

    @Test("the summary names each kind with a count and examples")
    func summary() {
        var history = ListAppendCheckerTests.valid()
        history.finals[2].lists["l0"] = ["w0-0", "w0-2", "w0-4", "w0-4"]
        let report = ListAppendChecker.check(history)
        let summary = report.summary()
        #expect(summary.contains("lostAppend x1"), "\(summary)")
        #expect(summary.contains("duplicateValue x1"), "\(summary)")
        #expect(summary.contains("n3: 1 acknowledged appends missing from l0 (length 4): w1-0 (rev 3)"), "\(summary)")
        #expect(report.count(.divergence) == 1)
    }

    @Test("prefix hashes: FNV-1a of each element and a newline")
    func prefixHash() {
        #expect(History.prefixHash([]) == 0xcbf2_9ce4_8422_2325)
        #expect(History.prefixHash(["a"]) != History.prefixHash(["a", ""]))
        #expect(History.prefixHash(["ab", "c"]) != History.prefixHash(["a", "bc"]))
        var hasher = History.PrefixHasher()
        hasher.add("w0-0")
        hasher.add("w1-0")
        #expect(hasher.value == History.prefixHash(["w0-0", "w1-0"]))
    }
}
