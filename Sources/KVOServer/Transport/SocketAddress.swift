import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

/// Conversions between host/port text and socket addresses. Stateless; any thread.
enum SocketAddress {
    /// Resolves a numeric or named host for binding. Startup only (it may block on DNS).
    static func resolve(host: String, port: Int) throws(TransportError) -> sockaddr_storage {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var results: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &results)
        guard status == 0, let first = results else {
            throw TransportError(operation: "resolving '\(host)' (\(String(cString: gai_strerror(status))))",
                                 status: UV_EAI_NONAME.rawValue)
        }
        defer { freeaddrinfo(results) }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { target in
            let length = min(Int(first.pointee.ai_addrlen), target.count)
            target.copyMemory(from: UnsafeRawBufferPointer(start: first.pointee.ai_addr, count: length))
        }
        return storage
    }

    /// "127.0.0.1:7420" or "[::1]:7420".
    static func describe(_ storage: sockaddr_storage) -> String {
        var storage = storage
        var text = [CChar](repeating: 0, count: 64)
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                if address.pointee.sa_family == UInt16(AF_INET6) {
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        uv_ip6_name(v6, &text, text.count)
                        return "[\(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })]:\(UInt16(bigEndian: v6.pointee.sin6_port))"
                    }
                } else {
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                        uv_ip4_name(v4, &text, text.count)
                        return "\(text.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }):\(UInt16(bigEndian: v4.pointee.sin_port))"
                    }
                }
            }
        }
    }

    /// Whether an address is a loopback one (127.0.0.0/8, ::1, or an IPv4-mapped 127.x address).
    static func isLoopback(_ storage: sockaddr_storage) -> Bool {
        var storage = storage
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                if address.pointee.sa_family == UInt16(AF_INET6) {
                    return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { v6 in
                        withUnsafeBytes(of: v6.pointee.sin6_addr) { bytes in
                            let loopback = bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1
                            let mapped = bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF
                                && bytes[12] == 127
                            return loopback || mapped
                        }
                    }
                }
                return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { v4 in
                    UInt32(bigEndian: v4.pointee.sin_addr.s_addr) >> 24 == 127
                }
            }
        }
    }

    /// The port of an address.
    static func port(_ storage: sockaddr_storage) -> Int {
        var storage = storage
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }
}
