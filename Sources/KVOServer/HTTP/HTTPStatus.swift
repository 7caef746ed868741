import KVOEngine
import KVOModel

/// The HTTP status codes kvod's HTTP listener answers with.
enum HTTPStatus: Int {
    case ok = 200
    case created = 201
    case noContent = 204
    case switchingProtocols = 101
    case badRequest = 400
    case unauthorized = 401
    case forbidden = 403
    case notFound = 404
    case methodNotAllowed = 405
    case notAcceptable = 406
    case conflict = 409
    case lengthRequired = 411
    case preconditionFailed = 412
    case unsupportedMediaType = 415
    case tooManyRequests = 429
    case insufficientStorage = 507
    case misdirectedRequest = 421
    case uriTooLong = 414
    case contentTooLarge = 413
    case upgradeRequired = 426
    case headersTooLarge = 431
    case serviceUnavailable = 503

    var reasonPhrase: String {
        switch self {
        case .ok: "OK"
        case .created: "Created"
        case .noContent: "No Content"
        case .switchingProtocols: "Switching Protocols"
        case .badRequest: "Bad Request"
        case .unauthorized: "Unauthorized"
        case .forbidden: "Forbidden"
        case .notFound: "Not Found"
        case .methodNotAllowed: "Method Not Allowed"
        case .notAcceptable: "Not Acceptable"
        case .conflict: "Conflict"
        case .lengthRequired: "Length Required"
        case .preconditionFailed: "Precondition Failed"
        case .unsupportedMediaType: "Unsupported Media Type"
        case .tooManyRequests: "Too Many Requests"
        case .insufficientStorage: "Insufficient Storage"
        case .misdirectedRequest: "Misdirected Request"
        case .uriTooLong: "URI Too Long"
        case .contentTooLarge: "Content Too Large"
        case .upgradeRequired: "Upgrade Required"
        case .headersTooLarge: "Request Header Fields Too Large"
        case .serviceUnavailable: "Service Unavailable"
        }
    }
}
