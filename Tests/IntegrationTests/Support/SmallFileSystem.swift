import Foundation

@testable import KVOTestSupport

/// A tmpfs of a few MiB mounted on a fresh temporary directory, for the tests of a full disk: kvod's data
/// directory inside it fills for real (SQLite gets ENOSPC). Needs the right to mount (root, as in CI);
/// `canMount` tells the tests to skip, with a message, where it is missing. Unmounted when released.
/// One test thread.
final class SmallFileSystem {
    let mountPoint: TemporaryDirectory
    var path: String { mountPoint.path }

    /// Mounts a tmpfs of `bytes` (mode 0700).
    init(bytes: Int) throws {
        mountPoint = try TemporaryDirectory("small-fs")
        try SmallFileSystem.mount(["-t", "tmpfs", "-o", "size=\(bytes),mode=0700", "tmpfs", mountPoint.path])
    }

    /// Grows (or shrinks) it to `bytes` in place: space freed, as an operator would free it.
    func resize(bytes: Int) throws {
        try SmallFileSystem.mount(["-o", "remount,size=\(bytes)", mountPoint.path])
    }

    /// A directory inside it (not created).
    func appending(_ name: String) -> String { mountPoint.appending(name) }

    deinit {
        let umount = Process()
        umount.executableURL = URL(fileURLWithPath: "/bin/umount")
        umount.arguments = ["-l", mountPoint.path]
        try? umount.run()
        umount.waitUntilExit()
    }

    /// Whether this machine lets the tests mount a tmpfs (tried once).
    static let canMount: Bool = (try? SmallFileSystem(bytes: 1 << 20)) != nil

    private static func mount(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/mount")
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw CocoaError(.fileWriteNoPermission, userInfo: [NSLocalizedDescriptionKey: "mount \(arguments.joined(separator: " ")) exited \(process.terminationStatus)"])
        }
    }
}
