// The build tool of GitCommitPlugin: writes GitCommit.swift (`KVODBuildCommit.hash`, the commit kvod was built
// from) by reading the repository's files: HEAD, then the loose ref it names or packed-refs. No `git` command
// (a build machine or image may have none), no network. "unknown" when the package is not a git checkout
// (a Docker build context without .git, a source tarball) or HEAD cannot be resolved.
//
//   git-commit-file PACKAGE_DIRECTORY OUTPUT_FILE
//
// The file is rewritten only when its text changes, so that a build after a run that found the same commit
// compiles nothing again. Runs at build time on the build machine only; kvod never links it.
import Foundation

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("git-commit-file: \(message)\n".utf8))
    exit(1)
}

/// The text of `path`, trimmed of surrounding white space; nil when it cannot be read.
func contents(_ path: String) -> String? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// `path` made absolute against `base` when it is relative.
func resolve(_ path: String, against base: String) -> String {
    path.hasPrefix("/") ? path : base + "/" + path
}

/// A full object name: 40 (SHA-1) or 64 (SHA-256) lowercase hex digits.
func isObjectName(_ text: String) -> Bool {
    (text.utf8.count == 40 || text.utf8.count == 64) && text.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
}

/// The commit HEAD names in the checkout at `package`, or nil. `.git` is a directory, or (a linked worktree,
/// a submodule) a file `gitdir: PATH`; a worktree's refs live in its common directory (`commondir`).
func headCommit(package: String) -> String? {
    let dotGit = package + "/.git"
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: dotGit, isDirectory: &isDirectory) else { return nil }
    var gitDirectory = dotGit
    if !isDirectory.boolValue {
        guard let link = contents(dotGit), link.hasPrefix("gitdir:") else { return nil }
        gitDirectory = resolve(link.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespaces), against: package)
    }
    let commonDirectory = contents(gitDirectory + "/commondir").map { resolve($0, against: gitDirectory) } ?? gitDirectory
    guard let head = contents(gitDirectory + "/HEAD") else { return nil }
    guard head.hasPrefix("ref:") else { return isObjectName(head) ? head : nil }
    let ref = head.dropFirst("ref:".count).trimmingCharacters(in: .whitespaces)
    for directory in [gitDirectory, commonDirectory] {
        if let loose = contents(directory + "/" + ref), isObjectName(loose) { return loose }
    }
    // packed-refs: `<object name> <ref>` lines, `#` headers and `^<peeled>` lines.
    for line in (contents(commonDirectory + "/packed-refs") ?? "").split(separator: "\n") {
        let fields = line.split(separator: " ", maxSplits: 1)
        if fields.count == 2, fields[1] == ref, isObjectName(String(fields[0])) { return String(fields[0]) }
    }
    return nil
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: git-commit-file PACKAGE_DIRECTORY OUTPUT_FILE") }
let commit = headCommit(package: arguments[1]) ?? "unknown"
let text = """
    // Generated at build time by GitCommitPlugin (Plugins/GitCommitFile) from the checkout's HEAD; not checked in.
    extension KVODBuildCommit {
        /// The commit kvod was built from (its full object name), or "unknown".
        public static let hash = "\(commit)"
    }

    """
if contents(arguments[2]).map({ $0 + "\n" }) == text { exit(0) }
do {
    try Data(text.utf8).write(to: URL(fileURLWithPath: arguments[2]), options: .atomic)
} catch {
    fail("cannot write \(arguments[2]): \(error)")
}
