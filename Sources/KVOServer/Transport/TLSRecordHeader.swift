import KVOEngine
import KVOModel

/// What the first bytes of a connection say when they begin a TLS record: for the log line of a TLS
/// client that did not start with a ClientHello (`TLSSession.failureDescription`), and of a TLS record on
/// the plaintext port (`Connection`, `CloseReason.tlsOnPlainPort`). A TLS record
/// starts with its content type (20 change_cipher_spec, 21 alert, 22 handshake, 23 application_data),
/// then the version (3.x) and a 2-byte length; an unencrypted alert's body is its level and description.
///
/// Stateless; any thread.
enum TLSRecordHeader {
    /// The content type of an alert record.
    static let alertRecordType: UInt8 = 0x15
    /// The content type of a handshake record (a ClientHello's first byte).
    static let handshakeRecordType: UInt8 = 0x16

    /// A description of `bytes` (the first ones received, up to 7) for the log when they begin a TLS
    /// record other than a handshake; nil when they do not look like a TLS record.
    static func describe(_ bytes: [UInt8]) -> String? {
        guard bytes.first != handshakeRecordType, let record = recordName(bytes) else { return nil }
        return "the client sent \(record) instead of a ClientHello"
    }

    /// "a TLS alert record (fatal unknown_ca)", "a TLS handshake record", … when `bytes` (the first
    /// ones received, up to 7) begin a TLS record of a known content type and version 3.x; nil otherwise.
    static func recordName(_ bytes: [UInt8]) -> String? {
        guard bytes.count >= 2, bytes[1] == 0x03 else { return nil }
        switch bytes[0] {
        case alertRecordType:
            // An alert record of 2 bytes is readable (not encrypted): level, description.
            if bytes.count >= 7, bytes[3] == 0, bytes[4] == 2 {
                return "a TLS alert record (\(level(bytes[5])) \(description(bytes[6])))"
            }
            return "a TLS alert record"
        case 0x14: return "a TLS change_cipher_spec record"
        case handshakeRecordType: return "a TLS handshake record"
        case 0x17: return "a TLS application_data record"
        default: return nil
        }
    }

    static func level(_ value: UInt8) -> String {
        switch value {
        case 1: return "warning"
        case 2: return "fatal"
        default: return "level \(value)"
        }
    }

    /// The alert's name (RFC 8446 and RFC 5246, section 7.2), or its number.
    static func description(_ value: UInt8) -> String {
        switch value {
        case 0: return "close_notify"
        case 10: return "unexpected_message"
        case 20: return "bad_record_mac"
        case 21: return "decryption_failed"
        case 22: return "record_overflow"
        case 30: return "decompression_failure"
        case 40: return "handshake_failure"
        case 41: return "no_certificate"
        case 42: return "bad_certificate"
        case 43: return "unsupported_certificate"
        case 44: return "certificate_revoked"
        case 45: return "certificate_expired"
        case 46: return "certificate_unknown"
        case 47: return "illegal_parameter"
        case 48: return "unknown_ca"
        case 49: return "access_denied"
        case 50: return "decode_error"
        case 51: return "decrypt_error"
        case 60: return "export_restriction"
        case 70: return "protocol_version"
        case 71: return "insufficient_security"
        case 80: return "internal_error"
        case 86: return "inappropriate_fallback"
        case 90: return "user_canceled"
        case 100: return "no_renegotiation"
        case 109: return "missing_extension"
        case 110: return "unsupported_extension"
        case 111: return "certificate_unobtainable"
        case 112: return "unrecognized_name"
        case 113: return "bad_certificate_status_response"
        case 114: return "bad_certificate_hash_value"
        case 115: return "unknown_psk_identity"
        case 116: return "certificate_required"
        case 120: return "no_application_protocol"
        default: return "description \(value)"
        }
    }
}
