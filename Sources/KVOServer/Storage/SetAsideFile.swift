#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Moving a file aside without ever replacing another: the names under which `kvod restore --replace` and
/// `--init` keep a database and its logs they took out of the way (issue 42: two restores in one second once
/// gave the second set-aside database the first one's name, and the rename replaced it). Blocking file calls, for
/// the thread that owns the data directory (a command's, or the store's before the loop starts).
enum SetAsideFile {
    /// The first of `base`, `base-2`, `base-3`, … such that no file `name + suffix` exists for any of `suffixes`
    /// (a database's name is chosen with its `-wal`'s, so the pair keeps one name).
    static func freeName(_ base: String, suffixes: [String] = [""]) -> String {
        var candidate = base
        var number = 1
        while suffixes.contains(where: { access(candidate + $0, F_OK) == 0 || isLink(candidate + $0) }) {
            number += 1
            candidate = base + "-\(number)"
        }
        return candidate
    }

    /// Renames `source` to `destination` only while nothing is at `destination`: a hard link, then the source's
    /// removal (`rename` would replace a file there). Returns 0, or the `errno` (EEXIST: something is there).
    static func move(_ source: String, to destination: String) -> Int32 {
        guard link(source, destination) == 0 else { return errno }
        guard unlink(source) == 0 else {
            let reason = errno
            unlink(destination)
            return reason
        }
        return 0
    }

    /// Whether `path` is a symbolic link (a dangling one fails `access`, yet occupies the name).
    private static func isLink(_ path: String) -> Bool {
        var info = stat()
        return lstat(path, &info) == 0
    }
}
