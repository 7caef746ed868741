import CHTTPParser
import KVOEngine
import KVOModel

/// Splits the bytes of one HTTP connection into requests with http-parser (Debian's libhttp-parser-dev),
/// enforcing the listener's limits, which http-parser itself does not have (its only one is a compile-time
/// 80 KiB header cap): target length, header bytes and header count, and no request bodies except the HTTP API's
/// (a target under `/v1/`, with a `Content-Length` of at most `Limits.bodyBytes`, which the listener sets to
/// `--max-line`: what a JSON-lines request may carry).
///
/// Owned by one `Connection`; loop thread only. The C parser and its callbacks reach this object through
/// `parser.data` (unretained: the parser lives and dies with it).
final class HTTPRequestParser {
    /// What the listener accepts of one request.
    struct Limits {
        /// Longest request target (path and query), in bytes.
        var targetBytes = 2048
        /// Most bytes of header names and values together.
        var headerBytes = 8192
        /// Most header lines.
        var headerCount = 64
        /// Longest body of an HTTP API request (`/v1/…`); other requests take none.
        var bodyBytes = 1 << 20
    }

    /// The path prefix of the HTTP API, whose requests may have a body.
    static let apiPrefix: [UInt8] = Array("/v1/".utf8)

    /// The result of feeding bytes.
    enum Outcome {
        /// Every byte was taken and no request is complete yet.
        case needMore
        /// A request's head is complete; `consumed` bytes of the input made it (and any before it). After
        /// an upgrade request, the bytes after `consumed` belong to the new protocol.
        case request(HTTPRequestHead, consumed: Int)
        /// The bytes are not an acceptable request: answer with `status` and close.
        case failed(HTTPStatus, reason: String)
    }

    let limits: Limits
    private let parser: UnsafeMutablePointer<http_parser>
    // The request being parsed.
    private var target: [UInt8] = []
    private var headerName: [UInt8] = []
    private var headerValue: [UInt8] = []
    private var isReadingValue = false
    private var headerBytes = 0
    private var headerCount = 0
    private var headers: [String: String] = [:]
    private var body: [UInt8] = []
    private var completed: HTTPRequestHead?
    private var refusal: (HTTPStatus, String)?

    init(limits: Limits) {
        self.limits = limits
        parser = .allocate(capacity: 1)
        http_parser_init(parser, HTTP_REQUEST)
        parser.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    deinit {
        parser.deallocate()
    }

    /// Bytes held for the request being parsed (its target and the header being read), for the loop's
    /// input accounting.
    var bufferedCount: Int { target.count + headerName.count + headerValue.count + body.count }

    /// Parses `bytes` up to the end of the first complete request head in them.
    func feed(_ bytes: UnsafeBufferPointer<UInt8>) -> Outcome {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .needMore }
        let parsed = base.withMemoryRebound(to: CChar.self, capacity: bytes.count) { characters in
            withUnsafePointer(to: HTTPRequestParser.settings) { http_parser_execute(parser, $0, characters, bytes.count) }
        }
        if let (status, reason) = refusal { return .failed(status, reason: reason) }
        let error = kvod_http_parser_errno(parser)
        if let head = completed {
            completed = nil
            if error == HPE_PAUSED { http_parser_pause(parser, 0) }
            return .request(head, consumed: parsed)
        }
        guard error == HPE_OK else {
            let description = http_errno_description(error).map { String(cString: $0) } ?? "malformed request"
            return .failed(.badRequest, reason: description)
        }
        return .needMore
    }

    // MARK: - Building the request (from the callbacks)

    private func appendTarget(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard target.count + bytes.count <= limits.targetBytes else {
            return refuse(.uriTooLong, "request target longer than \(limits.targetBytes) bytes")
        }
        target.append(contentsOf: bytes)
        return 0
    }

    private func appendHeaderName(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        if isReadingValue {
            keepHeader()
            isReadingValue = false
        }
        if headerName.isEmpty {
            headerCount += 1
            guard headerCount <= limits.headerCount else {
                return refuse(.headersTooLarge, "more than \(limits.headerCount) header lines")
            }
        }
        return appendHeaderBytes(bytes, to: &headerName)
    }

    private func appendHeaderValue(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        isReadingValue = true
        return appendHeaderBytes(bytes, to: &headerValue)
    }

    private func appendHeaderBytes(_ bytes: UnsafeBufferPointer<UInt8>, to field: inout [UInt8]) -> Int32 {
        headerBytes += bytes.count
        guard headerBytes <= limits.headerBytes else {
            return refuse(.headersTooLarge, "headers longer than \(limits.headerBytes) bytes")
        }
        field.append(contentsOf: bytes)
        return 0
    }

    /// Files the header just read (when kvod uses it) and clears the field buffers.
    private func keepHeader() {
        let name = String(decoding: headerName, as: UTF8.self).lowercased()
        if HTTPRequestHead.keptHeaders.contains(name) {
            let value = String(decoding: headerValue, as: UTF8.self)
            headers[name] = headers[name].map { "\($0), \(value)" } ?? value
        }
        headerName.removeAll(keepingCapacity: true)
        headerValue.removeAll(keepingCapacity: true)
    }

    private func headersComplete() -> Int32 {
        if isReadingValue || !headerName.isEmpty { keepHeader() }
        isReadingValue = false
        let flags = UInt32(parser.pointee.flags)
        let isChunked = flags & F_CHUNKED.rawValue != 0
        let length = flags & F_CONTENTLENGTH.rawValue != 0 ? parser.pointee.content_length : 0
        guard isChunked || length > 0 else { return 0 }
        guard target.starts(with: HTTPRequestParser.apiPrefix) else {
            return refuse(.contentTooLarge, "kvod's HTTP requests take no body")
        }
        if isChunked { return refuse(.lengthRequired, "an HTTP API request's body needs a Content-Length (no chunked encoding)") }
        guard length <= UInt64(limits.bodyBytes) else {
            return refuse(.contentTooLarge, "request body longer than \(limits.bodyBytes) bytes (--max-line)")
        }
        body.reserveCapacity(Int(length))
        return 0
    }

    private func appendBody(_ bytes: UnsafeBufferPointer<UInt8>) -> Int32 {
        guard body.count + bytes.count <= limits.bodyBytes else {
            return refuse(.contentTooLarge, "request body longer than \(limits.bodyBytes) bytes (--max-line)")
        }
        body.append(contentsOf: bytes)
        return 0
    }

    /// The head is complete: kept for `feed`, and parsing pauses so that `feed` returns right after it.
    private func messageComplete() -> Int32 {
        let targetText = String(decoding: target, as: UTF8.self)
        let question = targetText.firstIndex(of: "?")
        let path = question.map { String(targetText[..<$0]) } ?? targetText
        let query = question.map { String(targetText[targetText.index(after: $0)...]) }
        let method = String(cString: http_method_str(http_method(rawValue: UInt32(parser.pointee.method))))
        completed = HTTPRequestHead(
            method: method, path: path, query: query, minorVersion: Int(parser.pointee.http_minor),
            keepAlive: http_should_keep_alive(parser) != 0, isUpgrade: parser.pointee.upgrade != 0, headers: headers,
            body: body)
        target.removeAll(keepingCapacity: true)
        headers = [:]
        body = []
        headerBytes = 0
        headerCount = 0
        http_parser_pause(parser, 1)
        return 0
    }

    /// Records why the request is refused and stops the parser (a callback's non-zero result).
    private func refuse(_ status: HTTPStatus, _ reason: String) -> Int32 {
        if refusal == nil {
            refusal = (status, reason)
            refusedAPIRequest = target.starts(with: HTTPRequestParser.apiPrefix)
        }
        return 1
    }

    /// Whether the request refused (`Outcome.failed`) was an HTTP API request (`/v1/…`), answered with problem details.
    private(set) var refusedAPIRequest = false

    // MARK: - Callbacks (no captures: the parser reaches this object through `data`)

    private static func owner(_ parser: UnsafeMutablePointer<http_parser>?) -> HTTPRequestParser {
        Unmanaged<HTTPRequestParser>.fromOpaque(parser!.pointee.data).takeUnretainedValue()
    }

    private static func buffer(_ at: UnsafePointer<CChar>?, _ length: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(start: UnsafeRawPointer(at)?.assumingMemoryBound(to: UInt8.self), count: length)
    }

    private static let settings: http_parser_settings = {
        var settings = http_parser_settings()
        settings.on_url = { parser, at, length in owner(parser).appendTarget(buffer(at, length)) }
        settings.on_header_field = { parser, at, length in owner(parser).appendHeaderName(buffer(at, length)) }
        settings.on_header_value = { parser, at, length in owner(parser).appendHeaderValue(buffer(at, length)) }
        settings.on_headers_complete = { parser in owner(parser).headersComplete() }
        settings.on_body = { parser, at, length in owner(parser).appendBody(buffer(at, length)) }
        settings.on_message_complete = { parser in owner(parser).messageComplete() }
        return settings
    }()
}
