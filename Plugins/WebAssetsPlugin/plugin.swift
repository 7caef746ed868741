import PackagePlugin

/// Embeds the inspector page and the JavaScript client (Sources/KVOServer/HTTP/Assets) into the KVOServer
/// target at build time: `embed-web-assets` writes WebAssets.swift into the plugin's work directory, and
/// SwiftPM compiles it with the target. It runs again whenever an asset changes (they are its inputs), so
/// the served bytes are always the files' bytes: no generated file is checked in.
@main
struct WebAssetsPlugin: BuildToolPlugin {
    /// The files embedded, under the target's HTTP/Assets (the tool's table lists the same ones).
    static let files = ["index.html", "inspector.js", "inspector.css", "kvod.js", "favicon.svg"]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let assets = target.directoryURL.appending(path: "HTTP/Assets")
        let output = context.pluginWorkDirectoryURL.appending(path: "WebAssets.swift")
        return [
            .buildCommand(
                displayName: "Embedding the web assets of \(target.name)",
                executable: try context.tool(named: "embed-web-assets").url,
                arguments: [assets.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: Self.files.map { assets.appending(path: $0) },
                outputFiles: [output])
        ]
    }
}
