#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Which file a path names: its device and inode (`stat`). Two identities differ when the file was
/// deleted and another created in its place, or the directory holding it was replaced. Used by the store (its
/// database's files, `DataDirectoryMarker`) and the Unix listener (its socket). A value; any thread.
struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    init(device: UInt64, inode: UInt64) {
        self.device = device
        self.inode = inode
    }

    /// The identity of the file at `path` now; nil when there is none (or it cannot be looked at).
    init?(path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// The identity of the Unix socket at `path` now (the path itself, not followed: `lstat`); nil when there is
    /// none or the file is not a socket. `UnixListener` removes its path on close only while it is its own socket.
    init?(socketAt path: String) {
        var info = stat()
        guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFSOCK else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    /// `device 2049 inode 131090`: as the data directory's marker writes it (`DataDirectoryMarker`) and log lines say it.
    var text: String { "device \(device) inode \(inode)" }

    /// Reads `text`'s form back; nil for anything else.
    init?(text: String) {
        let words = text.split(separator: " ")
        guard words.count == 4, words[0] == "device", words[2] == "inode",
              let device = UInt64(words[1]), let inode = UInt64(words[3]) else { return nil }
        self.init(device: device, inode: inode)
    }
}
