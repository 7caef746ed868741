import CLibUV

/// `Connection`'s libuv callbacks: no captures, the connection comes through `handle->data` (a retained
/// reference until the close callback) or, for a write, the request's `data` (retained until its callback).
/// Loop thread only.
extension Connection {
    static let allocateCallback: uv_alloc_cb = { handle, _, buffer in
        let loop = EventLoop.owner(of: handle!.pointee.loop)
        buffer!.pointee = uv_buf_t(base: loop.readBuffer, len: EventLoop.readBufferSize)
    }

    static let readCallback: uv_read_cb = { stream, count, _ in
        let connection = owner(of: UnsafeMutableRawPointer(stream!).assumingMemoryBound(to: uv_handle_t.self),
                               as: Connection.self)
        if count > 0 {
            let loop = EventLoop.owner(of: stream!.pointee.loop)
            // Any bytes count as a sign of life, a partial line too (`Server+Liveness`): one store per read.
            connection.lastReceivedAt = loop.clock.milliseconds
            let bytes = UnsafeBufferPointer(
                start: UnsafeRawPointer(loop.readBuffer).assumingMemoryBound(to: UInt8.self), count: count)
            connection.received(bytes)
        } else if count < 0 {
            // count == 0 is "nothing this time" (EAGAIN), not end of stream.
            let status = Int32(count)
            connection.close(reason: status == UV_EOF.rawValue ? .clientClosed : .socketError(uvErrorDescription(status)))
        }
    }

    static let writeCallback: uv_write_cb = { request, status in
        let connection = Unmanaged<Connection>.fromOpaque(request!.pointee.data).takeRetainedValue()
        connection.writeCompleted(status: status)
    }
}
