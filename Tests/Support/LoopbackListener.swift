import Foundation
import Glibc

/// A listening TCP socket on 127.0.0.1, at a port the kernel chose or a given one, for the test stand-ins
/// that play a server (`TCPProxy`, `ScriptedKVOD`) and for checking that a port is free (`LocalCluster`).
/// The caller owns `descriptor` and closes it.
enum LoopbackListener {
    /// Binds `port` (0: one the kernel chooses) and listens with `backlog`; throws when the socket cannot
    /// be made, bound (the port is taken) or read back.
    static func open(port: Int = 0, backlog: Int32) throws -> (descriptor: Int32, port: Int) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard listener >= 0 else { throw POSIXError(.EMFILE) }
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(listener, pointer, length) == 0 && listen(listener, backlog) == 0
                    && getsockname(listener, pointer, &length) == 0
            }
        }
        guard bound else {
            close(listener)
            throw POSIXError(.EADDRNOTAVAIL)
        }
        return (listener, Int(UInt16(bigEndian: address.sin_port)))
    }
}
