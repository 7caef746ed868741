import KVOJSON

/// What kvod's replication needs of its log stream's JetStream settings (docs/design.md, "The stream's
/// settings"), and the duplicate window kvod gives a stream it creates.
///
/// kvod creates the stream itself (file storage, `replicas`, only its subject, no limits, the duplicate window
/// below), but an operator may have made it beforehand, or changed it since (`nats stream add/edit`). A stream
/// found at start-up is checked against `problems(in:)`: the stream's `config` as JetStream states it (the
/// answer to `$JS.API.STREAM.INFO.<stream>`, read as JSON rather than through libnats 3.4's `jsStreamConfig`,
/// which predates settings such as `persist_mode`). Each problem is one line for the log; a problem that
/// `refuses` is one under which an acknowledged write could be lost or applied twice, or an entry no node has
/// applied yet could be dropped, so the node does not use the stream; the others only make writes fail or the
/// stream grow, and are warnings. A value; any thread.
struct StreamRequirements: Sendable {
    let stream: String
    let subject: String
    let replicas: Int
    /// `--cluster-write-timeout` in nanoseconds: how long a batch's append is retried with the same message id.
    let writeTimeoutNanoseconds: Int64

    init(_ configuration: ClusterConfiguration) {
        stream = configuration.stream
        subject = configuration.subject
        replicas = configuration.replicas
        writeTimeoutNanoseconds = Int64(configuration.writeTimeout * 1e9)
    }

    /// JetStream's own default duplicate window: 2 minutes.
    static let defaultDuplicateWindow: Int64 = 120_000_000_000
    /// What the window must hold beyond `--cluster-write-timeout`: the last retry of a batch leaves the node up
    /// to the timeout after the first attempt and may then wait in NATS (a stream leader being elected), and
    /// JetStream measures the window on its own clock.
    static let duplicateWindowMargin: Int64 = 30_000_000_000

    /// The shortest duplicate window under which a retried append is still recognised as a duplicate:
    /// `--cluster-write-timeout` plus the margin.
    var minimumDuplicateWindow: Int64 { writeTimeoutNanoseconds + StreamRequirements.duplicateWindowMargin }

    /// The duplicate window kvod sets on a stream it creates: JetStream's default, or the minimum when that
    /// is longer (a `--cluster-write-timeout` above 90 s).
    var duplicateWindow: Int64 { max(StreamRequirements.defaultDuplicateWindow, minimumDuplicateWindow) }

    /// One thing wrong with the stream's settings: the log line (without the "cluster: " prefix), and whether
    /// the node refuses to use the stream because of it.
    struct Problem: Equatable, Sendable {
        var refuses: Bool
        var text: String
    }

    /// What is wrong with `config` (a stream's `config` object as JetStream's API states it), the problems
    /// that refuse first; empty when the stream fits.
    func problems(in config: JSONValue) -> [Problem] {
        var problems: [Problem] = []
        func refuse(_ text: String) { problems.append(Problem(refuses: true, text: "stream '\(stream)' \(text)")) }
        func warn(_ text: String) { problems.append(Problem(refuses: false, text: "stream '\(stream)' \(text)")) }
        let storage = config["storage"]?.stringValue ?? "file"
        if storage != "file" {
            refuse("keeps its entries in \(storage) storage: a write acknowledged to a client is lost when the NATS servers restart; kvod needs file storage (recreate the stream)")
        }
        let actualReplicas = Int(config["num_replicas"]?.intValue ?? 1)
        if actualReplicas < replicas {
            refuse("has \(actualReplicas) replica\(actualReplicas == 1 ? "" : "s"), kvod needs \(replicas) (one per NATS server given to --cluster, at most 3): an acknowledged write would survive the loss of fewer servers (nats stream edit \(stream) --replicas \(replicas))")
        }
        let window = config["duplicate_window"]?.intValue ?? 0
        if window < minimumDuplicateWindow {
            refuse("has a duplicate window of \(StreamRequirements.seconds(window)), shorter than the \(StreamRequirements.seconds(minimumDuplicateWindow)) kvod needs (--cluster-write-timeout \(StreamRequirements.seconds(writeTimeoutNanoseconds)) plus \(StreamRequirements.seconds(StreamRequirements.duplicateWindowMargin))): a retried append could be stored twice and a write applied twice (nats stream edit \(stream) --dupe-window \(StreamRequirements.seconds(duplicateWindow)), or a lower --cluster-write-timeout)")
        }
        let subjects = config["subjects"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if !subjects.contains(where: { StreamRequirements.subject($0, matches: subject) }) {
            refuse("does not capture kvod's subject '\(subject)' (its subjects: \(subjects.isEmpty ? "none" : subjects.joined(separator: ", "))): kvod's appends would not reach it")
        } else if subjects.contains(where: { $0 != subject }) {
            warn("captures subjects besides kvod's '\(subject)' (\(subjects.joined(separator: ", "))): a message published on another one takes a stream sequence no node can apply, and the nodes stop applying there (halted: docs/design.md, \"Integrity of the stream\")")
        }
        if let retention = config["retention"]?.stringValue, retention != "limits" {
            refuse("has \(retention) retention: JetStream removes entries once consumed, before every node (or a node started later) has applied them; kvod needs limits retention (recreate the stream)")
        }
        if config["persist_mode"]?.stringValue == "async" {
            refuse("has persist_mode async: JetStream acknowledges an append before it is written, so an acknowledged write can be lost (recreate the stream without it)")
        }
        if config["no_ack"]?.boolValue == true {
            refuse("has no_ack set: appends are never acknowledged, so no write would be answered (recreate the stream without it)")
        }
        if config["mirror"].map({ $0 != .null }) == true {
            refuse("is a mirror of another stream: it takes no appends")
        }
        if config["sealed"]?.boolValue == true {
            refuse("is sealed: it takes no appends")
        }
        let maxAge = config["max_age"]?.intValue ?? 0
        if maxAge > 0 {
            refuse("drops entries older than \(StreamRequirements.seconds(maxAge)) (max_age): a node behind, or one started later, could no longer get entries it has not applied; kvod trims the stream itself behind its snapshots (nats stream edit \(stream) --max-age 0)")
        }
        let discardsNew = config["discard"]?.stringValue == "new"
        let perSubject = config["max_msgs_per_subject"]?.intValue ?? -1
        if perSubject > 0 {
            if discardsNew && config["discard_new_per_subject"]?.boolValue == true {
                warn("holds at most \(perSubject) messages per subject (max_msgs_per_subject, discarding new): writes fail `unavailable` once it is full")
            } else {
                refuse("keeps at most \(perSubject) messages on kvod's subject (max_msgs_per_subject) and drops the oldest: a node behind, or one started later, could no longer get entries it has not applied; kvod trims the stream itself behind its snapshots (nats stream edit \(stream) --max-msgs-per-subject -1)")
            }
        }
        for (key, what, flag) in [("max_msgs", "messages", "--max-msgs"), ("max_bytes", "bytes", "--max-bytes")] {
            guard let limit = config[key]?.intValue, limit > 0 else { continue }
            if discardsNew {
                warn("holds at most \(limit) \(what) (\(key), discarding new): writes fail `unavailable` once it is full, until kvod's trimming behind a snapshot makes room")
            } else {
                refuse("holds at most \(limit) \(what) (\(key)) and drops the oldest: a node behind, or one started later, could no longer get entries it has not applied; kvod trims the stream itself behind its snapshots (nats stream edit \(stream) \(flag) -1)")
            }
        }
        if config["deny_purge"]?.boolValue == true {
            warn("denies purges (deny_purge): kvod cannot trim it behind its snapshots, so it grows for ever")
        }
        if let sources = config["sources"]?.arrayValue, !sources.isEmpty {
            warn("sources other streams: their messages take stream sequences no node can apply, and the nodes stop applying there (halted)")
        }
        if let size = config["max_msg_size"]?.intValue, size > 0 {
            warn("refuses messages above \(size) bytes (max_msg_size): a batch of writes bigger than that (up to 128 KiB of requests) is never appended and its writes fail `unavailable`")
        }
        return problems.filter(\.refuses) + problems.filter { !$0.refuses }
    }

    /// The bridge's check of the stream it found: logs each problem (`log(text, isError)`) when they are not
    /// those it `reported` last time (so a check repeated every 250 ms logs them once), and returns why the node
    /// must not use the stream (nil: it may).
    func check(_ config: JSONValue, reported: inout [Problem], log: (String, Bool) -> Void) -> String? {
        let found = problems(in: config)
        if found != reported {
            for problem in found { log("cluster: \(problem.text)", true) }
            reported = found
        }
        let refusing = found.filter(\.refuses).count
        guard refusing > 0 else { return nil }
        return "its settings could lose or repeat acknowledged writes (\(refusing == 1 ? "the problem" : "the \(refusing) problems") logged above): this node neither appends to it nor applies it until they are corrected"
    }

    /// Whether NATS subject filter `filter` (tokens separated by `.`, `*` one token, a final `>` one or more)
    /// matches the literal subject `subject`.
    static func subject(_ filter: String, matches subject: String) -> Bool {
        let filterTokens = filter.split(separator: ".", omittingEmptySubsequences: false)
        let tokens = subject.split(separator: ".", omittingEmptySubsequences: false)
        for (index, token) in filterTokens.enumerated() {
            if token == ">" { return index == filterTokens.count - 1 && tokens.count > index }
            guard index < tokens.count, token == "*" || token == tokens[index] else { return false }
        }
        return filterTokens.count == tokens.count
    }

    /// Nanoseconds in words the NATS CLI takes: "24h", "2m", "90s", "1.5s".
    static func seconds(_ nanoseconds: Int64) -> String {
        if nanoseconds % 3_600_000_000_000 == 0, nanoseconds > 0 { return "\(nanoseconds / 3_600_000_000_000)h" }
        if nanoseconds % 60_000_000_000 == 0, nanoseconds > 0 { return "\(nanoseconds / 60_000_000_000)m" }
        if nanoseconds % 1_000_000_000 == 0 { return "\(nanoseconds / 1_000_000_000)s" }
        return "\(Double(nanoseconds) / 1e9)s"
    }
}
