import CNATS
import KVOJSON
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// A NATS connection with a JetStream context, for the snapshot reader and publisher: the few JetStream
/// calls they make (stream info, create a stream, get a message by sequence, publish with a message id,
/// purge below a sequence), each with its answer in Swift terms and its failure in words.
///
/// Every call blocks for at most about `timeoutMilliseconds` (the JetStream API's wait). Owned by one
/// thread at a time, never the loop thread while the loop serves (the start-up read runs before it does).
final class JetStreamSession {
    private var connection: OpaquePointer?
    private var jetStream: OpaquePointer?
    private let timeoutMilliseconds: Int64

    /// Connects to `servers`; `persistent`: reconnect for ever and keep trying the first connection in
    /// the background (the publisher), else fail at once when no server answers within the timeout.
    init(servers: [String], timeoutMilliseconds: Int64, persistent: Bool) throws(JetStreamSessionError) {
        self.timeoutMilliseconds = timeoutMilliseconds
        var options: OpaquePointer?
        guard natsOptions_Create(&options) == NATS_OK, let options else { throw .failed("cannot create the NATS options") }
        defer { natsOptions_Destroy(options) }
        let urls = servers.map { strdup($0) }
        defer { urls.forEach { free($0) } }
        var pointers = urls.map { UnsafePointer<CChar>($0) }
        _ = pointers.withUnsafeMutableBufferPointer { natsOptions_SetServers(options, $0.baseAddress, Int32($0.count)) }
        natsOptions_SetPingInterval(options, 1000)
        natsOptions_SetMaxPingsOut(options, 2)
        natsOptions_SetTimeout(options, timeoutMilliseconds)
        if persistent {
            natsOptions_SetMaxReconnect(options, -1)
            natsOptions_SetReconnectWait(options, 250)
            // A connected callback makes the first connect asynchronous (NATS_NOT_YET_CONNECTED at once when no
            // server answers); with none, natsConnection_Connect would block until one did: for ever here, and
            // the owner's stop() joins this thread.
            natsOptions_SetRetryOnFailedConnect(options, true, { _, _ in }, nil)
        }
        var connection: OpaquePointer?
        let status = natsConnection_Connect(&connection, options)
        guard status == NATS_OK || (persistent && status == NATS_NOT_YET_CONNECTED), let connection else {
            throw .failed("cannot connect to NATS: \(JetStreamSession.text(status))")
        }
        self.connection = connection
        var jsOptions = jsOptions()
        jsOptions_Init(&jsOptions)
        jsOptions.Wait = timeoutMilliseconds
        var jetStream: OpaquePointer?
        guard natsConnection_JetStream(&jetStream, connection, &jsOptions) == NATS_OK, let jetStream else {
            close()
            throw .failed("cannot make a JetStream context")
        }
        self.jetStream = jetStream
    }

    deinit { close() }

    func close() {
        if let jetStream { jsCtx_Destroy(jetStream) }
        jetStream = nil
        if let connection {
            natsConnection_Close(connection)
            natsConnection_Destroy(connection)
        }
        connection = nil
    }

    /// The stream's first and last sequence (an empty stream's first is its last + 1); nil when there is
    /// no such stream.
    func streamBounds(_ stream: String) throws(JetStreamSessionError) -> (first: UInt64, last: UInt64)? {
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var error = jsErrCode(0)
        let status = js_GetStreamInfo(&info, jetStream, stream, nil, &error)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let info else { throw .failed("cannot look stream '\(stream)' up: \(JetStreamSession.text(status, error))") }
        defer { jsStreamInfo_Destroy(info) }
        return (info.pointee.State.FirstSeq, info.pointee.State.LastSeq)
    }

    /// Creates stream `stream` capturing `subject` (file storage, `replicas` replicas, JetStream's default
    /// duplicate window, stated) unless it exists.
    func ensureStream(_ stream: String, subject: String, replicas: Int) throws(JetStreamSessionError) {
        if try streamBounds(stream) != nil { return }
        let (status, error) = JetStreamSession.addStream(stream, subject: subject, replicas: replicas,
                                                         duplicateWindow: StreamRequirements.defaultDuplicateWindow, to: jetStream)
        // Another node may have created it meanwhile.
        if status != NATS_OK, (try? streamBounds(stream)) != nil { return }
        guard status == NATS_OK else { throw .failed("cannot create stream '\(stream)': \(JetStreamSession.text(status, error))") }
    }

    /// Creates file-stored stream `stream` of one subject with `replicas` replicas and a duplicate window of
    /// `duplicateWindow` nanoseconds through the JetStream context `jetStream` (`js_AddStream`); no limits
    /// (messages, bytes, age: unlimited, JetStream's defaults), limits retention. The status and JetStream
    /// error code. Shared with `NATSBridge`. The calling thread's context.
    static func addStream(_ stream: String, subject: String, replicas: Int, duplicateWindow: Int64,
                          to jetStream: OpaquePointer?) -> (natsStatus, jsErrCode) {
        var config = jsStreamConfig()
        jsStreamConfig_Init(&config)
        let name = strdup(stream)
        let subjectCopy = strdup(subject)
        defer {
            free(name)
            free(subjectCopy)
        }
        var subjects: [UnsafePointer<CChar>?] = [UnsafePointer(subjectCopy)]
        config.Name = UnsafePointer(name)
        config.Storage = js_FileStorage
        config.Replicas = Int64(replicas)
        config.Duplicates = duplicateWindow
        var info: UnsafeMutablePointer<jsStreamInfo>?
        var error = jsErrCode(0)
        let status = subjects.withUnsafeMutableBufferPointer { buffer in
            config.Subjects = buffer.baseAddress
            config.SubjectsLen = 1
            return js_AddStream(&info, jetStream, &config, nil, &error)
        }
        if status == NATS_OK { jsStreamInfo_Destroy(info) }
        return (status, error)
    }

    /// The settings of stream `stream` as JetStream states them: the `config` object of the answer to
    /// `$JS.API.STREAM.INFO.<stream>`, asked on `connection` (a raw request, so that settings libnats 3.4's
    /// `jsStreamConfig` does not know, such as `persist_mode`, are there too). Waits at most
    /// `timeoutMilliseconds`. Any thread. For `StreamRequirements.problems(in:)`.
    static func streamConfiguration(_ stream: String, on connection: OpaquePointer?,
                                    timeoutMilliseconds: Int64) throws(JetStreamSessionError) -> JSONValue {
        var reply: OpaquePointer?
        let status = natsConnection_Request(&reply, connection, "$JS.API.STREAM.INFO.\(stream)", nil, 0, timeoutMilliseconds)
        guard status == NATS_OK, let reply else {
            throw .failed("cannot read the settings of stream '\(stream)': \(JetStreamSession.text(status))")
        }
        let data = takeData(of: reply)
        guard let answer = try? JSONParser.parse(data) else {
            throw .failed("cannot read the settings of stream '\(stream)': JetStream's answer is not JSON")
        }
        if let error = answer["error"] {
            let description = error["description"]?.stringValue ?? "\(error)"
            let code = error["err_code"]?.intValue.map { " (JetStream error \($0))" } ?? ""
            throw .failed("cannot read the settings of stream '\(stream)': \(description)\(code)")
        }
        guard let config = answer["config"], config.objectValue != nil else {
            throw .failed("cannot read the settings of stream '\(stream)': JetStream's answer has no config")
        }
        return config
    }

    /// `streamConfiguration(_:on:timeoutMilliseconds:)` on this session's connection.
    func streamConfiguration(_ stream: String) throws(JetStreamSessionError) -> JSONValue {
        try JetStreamSession.streamConfiguration(stream, on: connection, timeoutMilliseconds: timeoutMilliseconds)
    }

    /// A copy of `message`'s data; destroys the message.
    private static func takeData(of message: OpaquePointer) -> [UInt8] {
        defer { natsMsg_Destroy(message) }
        let length = Int(natsMsg_GetDataLength(message))
        var data = [UInt8](repeating: 0, count: length)
        if length > 0, let source = natsMsg_GetData(message) {
            data.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: source, count: length)) }
        }
        return data
    }

    /// The data of message `sequence` of `stream`; nil when there is none (purged or deleted).
    func message(_ stream: String, sequence: UInt64) throws(JetStreamSessionError) -> [UInt8]? {
        var message: OpaquePointer?
        var error = jsErrCode(0)
        let status = js_GetMsg(&message, jetStream, stream, sequence, nil, &error)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else {
            throw .failed("cannot read message \(sequence) of '\(stream)': \(JetStreamSession.text(status, error))")
        }
        return JetStreamSession.takeData(of: message)
    }

    /// The data of the last message on `subject` in `stream`; nil when there is none.
    func lastMessage(_ stream: String, subject: String) throws(JetStreamSessionError) -> [UInt8]? {
        var message: OpaquePointer?
        var error = jsErrCode(0)
        let status = js_GetLastMsg(&message, jetStream, stream, subject, nil, &error)
        if status == NATS_NOT_FOUND { return nil }
        guard status == NATS_OK, let message else {
            throw .failed("cannot read the last message of '\(stream)': \(JetStreamSession.text(status, error))")
        }
        return JetStreamSession.takeData(of: message)
    }

    /// Appends `data` to the stream capturing `subject` with message id `messageID`; the stream sequence
    /// it has. When JetStream drops it as a duplicate, the first copy's sequence, or 0 when that copy is
    /// still being replicated (a clustered stream acknowledges such a duplicate with sequence 0).
    func publish(_ subject: String, _ data: [UInt8], messageID: String, maxWaitMilliseconds: Int64) throws(JetStreamSessionError) -> UInt64 {
        var options = jsPubOptions()
        jsPubOptions_Init(&options)
        options.MaxWait = maxWaitMilliseconds
        var ack: UnsafeMutablePointer<jsPubAck>?
        var error = jsErrCode(0)
        let status = messageID.withCString { id in
            options.MsgId = id
            return data.withUnsafeBytes { bytes in
                js_Publish(&ack, jetStream, subject, bytes.baseAddress, Int32(bytes.count), &options, &error)
            }
        }
        guard status == NATS_OK, let ack else { throw .failed("cannot publish to '\(subject)': \(JetStreamSession.text(status, error))") }
        defer { jsPubAck_Destroy(ack) }
        return ack.pointee.Sequence
    }

    /// Removes every message of `stream` below sequence `sequence` (nothing when it is 0 or 1).
    func purge(_ stream: String, below sequence: UInt64) throws(JetStreamSessionError) {
        // Nothing is below sequence 1, and nats-server reads a purge request with sequence 0 or 1 as "purge
        // everything" (its `PurgeEx`): never send one.
        guard sequence > 1 else { return }
        var options = jsOptions()
        jsOptions_Init(&options)
        options.Stream.Purge.Sequence = sequence
        var error = jsErrCode(0)
        let status = js_PurgeStream(jetStream, stream, &options, &error)
        guard status == NATS_OK else { throw .failed("cannot purge '\(stream)' below \(sequence): \(JetStreamSession.text(status, error))") }
    }

    static func text(_ status: natsStatus, _ error: jsErrCode = jsErrCode(0)) -> String {
        let text = natsStatus_GetText(status).map { String(cString: $0) } ?? "status \(status.rawValue)"
        return error.rawValue != 0 ? "\(text) (JetStream error \(error.rawValue))" : text
    }
}

/// A JetStream call that did not succeed, in words.
enum JetStreamSessionError: Error, CustomStringConvertible {
    case failed(String)

    var description: String {
        switch self {
        case let .failed(reason): return reason
        }
    }
}
