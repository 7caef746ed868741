import Foundation
import Testing

@testable import KVOEngine
@testable import KVOModel
@testable import KVOServer

/// The inspector page and the JavaScript client are compiled into kvod (WebAssets.swift, generated at build
/// time by WebAssetsPlugin from Sources/KVOServer/HTTP/Assets). These fail when the generated literals do
/// not give back the files byte for byte, or a file is not embedded.
@Suite("web assets")
struct WebAssetsTests {
    private static let assetsFolder = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Sources/KVOServer/HTTP/Assets")

    @Test("every embedded asset is byte for byte the file it was generated from")
    func embeddedMatchesFiles() throws {
        for asset in WebAssets.all {
            let file = try Data(contentsOf: Self.assetsFolder.appendingPathComponent(asset.fileName))
            #expect(asset.body == Array(file), "\(asset.fileName) differs from its embedded copy")
        }
    }

    @Test("every file in the assets folder is served, at the paths the page links to")
    func everyFileIsServed() throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.assetsFolder.path).sorted()
        #expect(Set(WebAssets.all.map(\.fileName)).sorted() == files)
        #expect(WebAsset.named("/")?.fileName == "index.html")
        // The icon the page names, and the path browsers ask for unasked: one file at both.
        #expect(WebAsset.named("/favicon.svg")?.contentType == "image/svg+xml")
        #expect(WebAsset.named("/favicon.ico")?.fileName == "favicon.svg")
        #expect(WebAsset.named("/kvod.js")?.contentType == "text/javascript; charset=utf-8")
        #expect(WebAsset.named("/nope.js") == nil)
    }
}
