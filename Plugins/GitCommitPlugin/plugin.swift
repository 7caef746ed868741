import Foundation
import PackagePlugin

/// Gives the KVOBuildCommit target the commit the package is built from (`kvod_build_info{commit}`, `kvod
/// --version`): `git-commit-file` writes GitCommit.swift into the plugin's work directory from the checkout's
/// HEAD, and SwiftPM compiles it with the target.
///
/// The command's inputs are the files that change when HEAD's commit does (`headFiles`): the command runs again
/// when one of them changes (a commit, a checkout), and not otherwise. SwiftPM asks the plugin for them only
/// when it plans the build again (after a change to Package.swift), not at every build, so they must be files
/// that stay: a declared input that disappears fails the build. The tool rewrites the file only when the commit
/// changed, and then only KVOBuildCommit (one constant, imported by the executables alone, never by KVOServer)
/// is compiled again and kvod relinked: the server's modules are not rebuilt for a new commit. Without a .git
/// (a Docker build context, a tarball) there are no inputs; the file says "unknown".
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

    /// The files that change when HEAD's commit does, of those that exist now.
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
        // HEAD (a checkout of another branch or commit) and its reflog, to which git appends whenever HEAD's
        // commit moves (commit, reset, merge, pull, checkout), whatever ref holds it. Not the loose ref file
        // itself: `git gc` packs and deletes it, and a declared input that is gone fails the build.
        files += [gitDirectory + "/HEAD", gitDirectory + "/logs/HEAD"]
        // Without a reflog (core.logAllRefUpdates off): the branches' directory, which a ref update changes
        // (git writes `<ref>.lock` and renames it), and packed-refs.
        files += [commonDirectory + "/refs/heads", commonDirectory + "/packed-refs"]
        var seen = Set<String>()
        return files.filter { manager.fileExists(atPath: $0) && seen.insert($0).inserted }
    }
}
