// swift-tools-version:6.1
import PackageDescription

// The client library alone: what an app needs to talk to kvod, and nothing the server needs.
//
// Depend on it from a checkout of this repository with
//
//     .package(path: "<checkout>/client"),
//     ... .product(name: "KVOClient", package: "client")
//
// It has no package dependencies (nothing is fetched) and builds three targets: KVOClient, KVOJSON (the
// JSON values and parser it shares with the server) and COpenSSL (the system's OpenSSL 3, for TLS). Its
// Sources are symbolic links to the repository's own Sources/KVOClient, Sources/KVOJSON and Sources/COpenSSL:
// one copy of the code, built by the top-level package (kvod, its tests, kvoclient) and by this one. The
// top-level package's KVOClient product is the same library, for those who depend on the repository by URL
// (which resolves the server's dependencies too). README.md, "Use KVOClient in your package";
// Tests/IntegrationTests/ClientPackageTests.swift builds an outside package against this manifest.
let package = Package(
    name: "client",
    platforms: [.macOS(.v14)],
    products: [
        .library(name: "KVOClient", targets: ["KVOClient"]),
        .library(name: "KVOJSON", targets: ["KVOJSON"]),
    ],
    targets: [
        // OpenSSL 3 from the system (Debian: libssl-dev; macOS: Homebrew's openssl@3).
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .target(name: "KVOJSON"),
        .target(name: "KVOClient", dependencies: ["COpenSSL", "KVOJSON"]),
    ]
)
