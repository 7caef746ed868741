/// The git commit kvod was built from: `hash` is generated at build time by GitCommitPlugin from the checkout's
/// HEAD (Plugins/GitCommitPlugin), "unknown" when the sources are not a git checkout (a Docker build context
/// without .git, a tarball).
///
/// A target of its own, imported by the executables only (kvod passes it to the server as
/// `ServerConfiguration.buildCommit`): a new commit recompiles this one constant and relinks them, not the
/// server's modules, which a commit in `KVOVersion` would (every module importing it).
///
/// Constants only; any thread.
public enum KVODBuildCommit {
    /// The abbreviated form (its first 7 digits), as `git log --oneline` shows it; "unknown" as it is.
    public static var short: String {
        hash == unknown ? hash : String(hash.prefix(7))
    }

    /// What `hash` is when the commit is not known.
    public static let unknown = "unknown"
}
