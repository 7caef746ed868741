/// kvod's version: the one place it is written. `kvod --version`, `kvoclient --version`, kvod's start-up log
/// line, `hello`'s reply and the `kvod_build_info` metric all read it here. (No git commit: SwiftPM has no
/// build-time hook for it short of a plugin that would rebuild every dependent module after each commit.)
///
/// Constants only; any thread.
public enum KVODVersion {
    /// The release, as `hello` answers it (`"version"`). Change it here, and only here, for a release.
    public static let version = "0.1.0"
}
