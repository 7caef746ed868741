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

    @Test("every embedded asset is byte for byte the files it was generated from, joined in order")
    func embeddedMatchesFiles() throws {
        for asset in WebAssets.all {
            var files: [UInt8] = []
            for name in asset.fileNames {
                files += try Data(contentsOf: Self.assetsFolder.appendingPathComponent(name))
            }
            expectEqual(asset.body, files, "\(asset.fileNames) differs from its embedded copy")
            // A module made of parts joins them in their names' order, so that `cat` of its folder is what is served.
            expectEqual(asset.fileNames, asset.fileNames.sorted(), "\(asset.path)'s parts are not in their names' order")
        }
    }

    @Test("every file in the assets folder is served, at the paths the page links to")
    func everyFileIsServed() throws {
        let folder = Self.assetsFolder.path
        let files = try #require(FileManager.default.subpaths(atPath: folder)).filter { path in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: folder + "/" + path, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
        expectEqual(Set(WebAssets.all.flatMap(\.fileNames)).sorted(), files.sorted())
        expectEqual(WebAsset.named("/")?.fileNames, ["index.html"])
        // The icon the page names, and the path browsers ask for unasked: one file at both.
        expectEqual(WebAsset.named("/favicon.svg")?.contentType, "image/svg+xml")
        expectEqual(WebAsset.named("/favicon.ico")?.fileNames, ["favicon.svg"])
        // The client is one module, whatever it is made of; the inspector's modules each at their own path.
        expectEqual(WebAsset.named("/kvod.js")?.contentType, "text/javascript; charset=utf-8")
        expectEqual(WebAsset.named("/kvod.js")?.fileNames.allSatisfy { $0.hasPrefix("kvod/") }, true)
        for asset in WebAssets.all where asset.fileNames.contains(where: { $0.hasPrefix("inspector/") }) {
            #expect(asset.fileNames.count == 1 && asset.path == "/" + asset.fileNames[0])
            expectEqual(asset.contentType, "text/javascript; charset=utf-8")
        }
        #expect(WebAsset.named("/nope.js") == nil)
        #expect(WebAsset.named("/kvod/client.js") == nil)
    }
}
