import PackagePlugin

/// Embeds the inspector page and the JavaScript client (Sources/KVOServer/HTTP/Assets) into the KVOServer
/// target at build time: `embed-web-assets` writes WebAssets.swift into the plugin's work directory, and
/// SwiftPM compiles it with the target. It runs again whenever an asset changes (they are its inputs), so
/// the served bytes are always the files' bytes: no generated file is checked in.
@main
struct WebAssetsPlugin: BuildToolPlugin {
    /// The files embedded, under the target's HTTP/Assets: the tool's table must read the same ones (it checks,
    /// and fails the build otherwise), so that a change to any of them embeds the assets again.
    static let files = [
        "index.html", "inspector.css", "favicon.svg",
        "inspector.js", "inspector/dashboard.js", "inspector/definitions.js", "inspector/events.js",
        "inspector/object-list.js", "inspector/object.js", "inspector/page.js", "inspector/tree.js",
        "kvod/client.js", "kvod/observation.js", "kvod/protocol.js", "openapi.json",
    ]

    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let assets = target.directoryURL.appending(path: "HTTP/Assets")
        let output = context.pluginWorkDirectoryURL.appending(path: "WebAssets.swift")
        return [
            .buildCommand(
                displayName: "Embedding the web assets of \(target.name)",
                executable: try context.tool(named: "embed-web-assets").url,
                arguments: [assets.path(percentEncoded: false), output.path(percentEncoded: false)] + Self.files,
                inputFiles: Self.files.map { assets.appending(path: $0) },
                outputFiles: [output])
        ]
    }
}
