// The build tool of WebAssetsPlugin: writes WebAssets.swift (the files kvod's HTTP listener serves from its own
// binary) from the files of Sources/KVOServer/HTTP/Assets, each served asset as a multi-line raw string literal.
//
//   embed-web-assets ASSETS_DIRECTORY OUTPUT_FILE INPUT_FILE…
//
// INPUT_FILEs are the plugin's list of the files (relative to ASSETS_DIRECTORY); they must be the table's.
//
// Runs at build time on the build machine only; kvod never links it (so Foundation here costs kvod nothing).
import Foundation

let javaScript = "text/javascript; charset=utf-8"
/// Served path, the files it is made of, content type; the order of the generated table. An asset is one file, or
/// (`/kvod.js`) the parts of one module, joined as they are in this order (their names' order): users load the
/// client as one file (a page, `curl` into node), so it is served as one, however it is kept in the repository.
let table: [(path: String, files: [String], contentType: String)] = [
    ("/", ["index.html"], "text/html; charset=utf-8"),
    ("/inspector.js", ["inspector.js"], javaScript),
    // The inspector's ES modules, imported by /inspector.js and by each other.
    ("/inspector/dashboard.js", ["inspector/dashboard.js"], javaScript),
    ("/inspector/definitions.js", ["inspector/definitions.js"], javaScript),
    ("/inspector/events.js", ["inspector/events.js"], javaScript),
    ("/inspector/object-list.js", ["inspector/object-list.js"], javaScript),
    ("/inspector/object.js", ["inspector/object.js"], javaScript),
    ("/inspector/page.js", ["inspector/page.js"], javaScript),
    ("/inspector/tree.js", ["inspector/tree.js"], javaScript),
    ("/inspector.css", ["inspector.css"], "text/css; charset=utf-8"),
    ("/kvod.js", ["kvod/client.js", "kvod/observation.js", "kvod/protocol.js"], javaScript),
    // The page names /favicon.svg; /favicon.ico is what browsers ask for without being told (a 404 there is
    // an error in their console on every page load).
    ("/favicon.svg", ["favicon.svg"], "image/svg+xml"),
    ("/favicon.ico", ["favicon.svg"], "image/svg+xml"),
    // The HTTP API's OpenAPI 3.1 document (served by the API's route, `Server+HTTPAPI`).
    ("/v1/openapi.json", ["openapi.json"], "application/json"),
]
let delimiter = "####"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-web-assets: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count > 3 else { fail("usage: embed-web-assets ASSETS_DIRECTORY OUTPUT_FILE INPUT_FILE…") }
let assets = URL(fileURLWithPath: arguments[1], isDirectory: true)
let output = URL(fileURLWithPath: arguments[2])
// The files the plugin declared as the command's inputs (those whose change runs this again) must be the files
// the table reads: a file read but not declared would be served stale after an edit.
let inputs = Set(arguments.dropFirst(3))
let read = Set(table.flatMap(\.files))
guard inputs == read else {
    fail("WebAssetsPlugin's files and this table's differ: \(inputs.symmetricDifference(read).sorted().joined(separator: ", "))")
}

var lines = [
    "// Generated at build time by WebAssetsPlugin (Plugins/EmbedWebAssets) from Sources/KVOServer/HTTP/Assets.",
    "",
    "/// The files kvod's HTTP listener serves from its own binary: the inspector page (`GET /`, with its",
    "/// modules and style sheet) and the JavaScript client (`GET /kvod.js`). Immutable; any thread.",
    "enum WebAssets {",
    "    /// The served assets, by path.",
    "    static let all: [WebAsset] = [",
]
for entry in table {
    var text = ""
    for file in entry.files {
        let url = assets.appendingPathComponent(file)
        guard let data = FileManager.default.contents(atPath: url.path), let part = String(data: data, encoding: .utf8) else {
            fail("cannot read \(url.path) as UTF-8")
        }
        // A raw literal cannot hold its own closing delimiter, and a carriage return would not survive it.
        if part.contains("\"\"\"\(delimiter)") || part.contains("\r") {
            fail("\(file) contains a carriage return or the literal's closing delimiter")
        }
        text += part
    }
    // The literal's value is the lines between the delimiters without the last line break: one extra
    // line break keeps the file's own final one.
    let literal = "\(delimiter)\"\"\"\n\(text)\n\"\"\"\(delimiter)"
    let files = entry.files.map { "\"\($0)\"" }.joined(separator: ", ")
    lines.append("        WebAsset(path: \"\(entry.path)\", fileNames: [\(files)], contentType: \"\(entry.contentType)\", text: \(literal)),")
}
lines += ["    ]", "}", ""]
// Unchanged bytes are not written again: SwiftPM runs this tool whenever the tool itself was relinked (each
// `swift build --product …` of another product does), and a rewritten file, even identical, makes the whole
// KVOServer module compile again, minutes in a release build (whole-module), for nothing.
let generated = Data(lines.joined(separator: "\n").utf8)
if FileManager.default.contents(atPath: output.path) == generated { exit(0) }
do {
    try generated.write(to: output, options: .atomic)
} catch {
    fail("cannot write \(output.path): \(error)")
}
