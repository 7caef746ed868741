// The build tool of WebAssetsPlugin: writes WebAssets.swift (the files kvod's HTTP listener serves from its own
// binary) from the files of Sources/KVOServer/HTTP/Assets, each as a multi-line raw string literal.
//
//   embed-web-assets ASSETS_DIRECTORY OUTPUT_FILE
//
// Runs at build time on the build machine only; kvod never links it (so Foundation here costs kvod nothing).
import Foundation

/// Served path, file, content type; the order of the generated table.
let table: [(path: String, file: String, contentType: String)] = [
    ("/", "index.html", "text/html; charset=utf-8"),
    ("/inspector.js", "inspector.js", "text/javascript; charset=utf-8"),
    ("/inspector.css", "inspector.css", "text/css; charset=utf-8"),
    ("/kvod.js", "kvod.js", "text/javascript; charset=utf-8"),
    // The page names /favicon.svg; /favicon.ico is what browsers ask for without being told (a 404 there is
    // an error in their console on every page load).
    ("/favicon.svg", "favicon.svg", "image/svg+xml"),
    ("/favicon.ico", "favicon.svg", "image/svg+xml"),
]
let delimiter = "####"

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("embed-web-assets: \(message)\n".utf8))
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: embed-web-assets ASSETS_DIRECTORY OUTPUT_FILE") }
let assets = URL(fileURLWithPath: arguments[1], isDirectory: true)
let output = URL(fileURLWithPath: arguments[2])

var lines = [
    "// Generated at build time by WebAssetsPlugin (Plugins/EmbedWebAssets) from Sources/KVOServer/HTTP/Assets.",
    "",
    "/// The files kvod's HTTP listener serves from its own binary: the inspector page (`GET /`, with its",
    "/// script and style sheet) and the JavaScript client (`GET /kvod.js`). Immutable; any thread.",
    "enum WebAssets {",
    "    /// The served assets, by path.",
    "    static let all: [WebAsset] = [",
]
for entry in table {
    let url = assets.appendingPathComponent(entry.file)
    guard let data = FileManager.default.contents(atPath: url.path), let text = String(data: data, encoding: .utf8) else {
        fail("cannot read \(url.path) as UTF-8")
    }
    // A raw literal cannot hold its own closing delimiter, and a carriage return would not survive it.
    if text.contains("\"\"\"\(delimiter)") || text.contains("\r") {
        fail("\(entry.file) contains a carriage return or the literal's closing delimiter")
    }
    // The literal's value is the lines between the delimiters without the last line break: one extra
    // line break keeps the file's own final one.
    let literal = "\(delimiter)\"\"\"\n\(text)\n\"\"\"\(delimiter)"
    lines.append("        WebAsset(path: \"\(entry.path)\", fileName: \"\(entry.file)\", contentType: \"\(entry.contentType)\", text: \(literal)),")
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
