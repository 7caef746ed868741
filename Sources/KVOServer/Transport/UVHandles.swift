import CLibUV
#if canImport(Glibc)
import Glibc
import KVOEngine
import KVOModel
#endif

// libuv handle lifetime, in one place (see docs/design.md):
// - handle memory is malloc'd here and lives until its close callback, which frees it;
// - `handle->data` holds a retained owner (`Unmanaged.passRetained`), released exactly once, in
//   the close callback.
// Loop thread only.

/// Allocates zeroed memory for a libuv handle of `kind`, typed as `T`.
func allocateHandle<T>(_ type: T.Type, kind: uv_handle_type) -> UnsafeMutablePointer<T> {
    let size = max(uv_handle_size(kind), MemoryLayout<T>.size)
    guard let raw = calloc(1, size) else { fatalError("out of memory allocating a libuv handle") }
    return raw.bindMemory(to: T.self, capacity: 1)
}

/// The generic `uv_handle_t` view of a concrete handle.
@inline(__always)
func asHandle<T>(_ handle: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_handle_t.self)
}

/// The generic `uv_stream_t` view of a stream handle (`uv_tcp_t`, `uv_pipe_t`).
@inline(__always)
func asStream<T>(_ handle: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_stream_t> {
    UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
}

/// Stores a retained reference to `owner` in the handle's `data`.
func retainOwner<T, Owner: AnyObject>(_ owner: Owner, in handle: UnsafeMutablePointer<T>) {
    asHandle(handle).pointee.data = Unmanaged.passRetained(owner).toOpaque()
}

/// The owner stored by `retainOwner`, without changing its retain count.
@inline(__always)
func owner<Owner: AnyObject>(of handle: UnsafeMutablePointer<uv_handle_t>, as type: Owner.Type) -> Owner {
    Unmanaged<Owner>.fromOpaque(handle.pointee.data).takeUnretainedValue()
}

/// Closes a handle made by `allocateHandle`; its close callback releases the owner (if any) and
/// frees the memory. Safe to call on a handle that is already closing.
func closeHandle<T>(_ handle: UnsafeMutablePointer<T>) {
    let generic = asHandle(handle)
    guard uv_is_closing(generic) == 0 else { return }
    uv_close(generic) { closed in
        guard let closed else { return }
        if let data = closed.pointee.data {
            Unmanaged<AnyObject>.fromOpaque(data).release()
        }
        free(closed)
    }
}

/// "ECONNRESET: connection reset by peer" for a libuv status code.
func uvErrorDescription(_ status: Int32) -> String {
    "\(String(cString: uv_err_name(status))): \(String(cString: uv_strerror(status)))"
}

/// A libuv call that failed during setup.
public struct TransportError: Error, CustomStringConvertible {
    public let operation: String
    public let status: Int32
    /// What the status means here, in words (nil: the status says it all).
    public let detail: String?

    init(operation: String, status: Int32, detail: String? = nil) {
        self.operation = operation
        self.status = status
        self.detail = detail
    }

    public var description: String {
        "\(operation) failed: \(uvErrorDescription(status))" + (detail.map { " (\($0))" } ?? "")
    }
}
