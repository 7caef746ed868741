import Foundation
import PackagePlugin

/// Gives the KVOBuildCommit target the commit the package is built from (`kvod_build_info{commit}`, `kvod
/// --version`): `git-commit-file` writes GitCommit.swift into the plugin's work directory from the checkout's
/// HEAD, and SwiftPM compiles it with the target.
///
/// The command's inputs are the files HEAD is resolved from (HEAD, the loose ref it names and its directory,
/// packed-refs, in the worktree's and the common git directory), found here each time the build is planned: the command runs
/// again when one of them changes (a commit, a checkout), and not otherwise. The tool rewrites the file only
/// when the commit changed, and only KVOBuildCommit (a type with one constant, imported by the executables
/// alone, never by KVOServer) is compiled again: the server's modules are not rebuilt for a new commit. Without
/// a .git (a Docker build context, a tarball) there are no inputs; the file says "unknown".
@main
struct GitCommitPlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let package = context.package.directoryURL.path(percentEncoded: false)
        let output = context.pluginWorkDirectoryURL.appending(path: "GitCommit.swift")
        return [
            .buildCommand(
                displayName: "Reading the git commit for \(target.name)",
                executable: try context.tool(named: "git-commit-file").url,
                arguments: [package, output.path(percentEncoded: false)],
                inputFiles: Self.headFiles(package: package).map { URL(fileURLWithPath: $0) },
                outputFiles: [output])
        ]
    }

    /// The files that decide what HEAD names (those that exist), as `git-commit-file` reads them.
    static func headFiles(package: String) -> [String] {
        let manager = FileManager.default
        func read(_ path: String) -> String? {
            manager.contents(atPath: path).map { String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines) }
        }
        func resolve(_ path: String, against base: String) -> String { path.hasPrefix("/") ? path : base + "/" + path }
        let dotGit = package + "/.git"
        var isDirectory: ObjCBool = false
        guard manager.fileExists(atPath: dotGit, isDirectory: &isDirectory) else { return [] }
        var gitDirectory = dotGit
        var files: [String] = []
        if !isDirectory.boolValue {
            files.append(dotGit)
            guard let link = read(dotGit), link.hasPrefix("gitdir:") else { return files }
            gitDirectory = resolve(link.dropFirst("gitdir:".count).trimmingCharacters(in: .whitespaces), against: package)
        }
        let commonDirectory = read(gitDirectory + "/commondir").map { resolve($0, against: gitDirectory) } ?? gitDirectory
        files.append(gitDirectory + "/HEAD")
        if let head = read(gitDirectory + "/HEAD"), head.hasPrefix("ref:") {
            let ref = head.dropFirst("ref:".count).trimmingCharacters(in: .whitespaces)
            // The ref's directory too: a commit on a branch that was only in packed-refs creates its loose
            // file there (the directory changes; the files known so far do not).
            for directory in [gitDirectory, commonDirectory] {
                let path = directory + "/" + ref
                files += [path, String(path[..<path.lastIndex(of: "/")!])]
            }
        }
        files.append(commonDirectory + "/packed-refs")
        var seen = Set<String>()
        return files.filter { manager.fileExists(atPath: $0) && seen.insert($0).inserted }
    }
}
