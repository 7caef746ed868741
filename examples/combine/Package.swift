// swift-tools-version:6.1
import PackageDescription

// kvod-combine: KVOClient observations composed with swift-async-algorithms (examples/README.md). A package of
// its own, so that the repository's package (and so every CI build and the Docker image) does not fetch or
// compile swift-async-algorithms and swift-collections for one example: it depends on the client library's own
// manifest (`client/`, as README.md's "Use KVOClient in your package" says an app does). Build and run it here:
//
//     cd examples/combine && swift run kvod-combine [--host 127.0.0.1] [--port 7420]
let package = Package(
    name: "kvod-combine",
    platforms: [.macOS(.v14)],
    dependencies: [
        .package(path: "../../client"),
        .package(url: "https://github.com/apple/swift-async-algorithms", exact: "1.1.4"),
    ],
    targets: [
        .executableTarget(
            name: "kvod-combine",
            dependencies: [
                .product(name: "KVOClient", package: "client"),
                .product(name: "AsyncAlgorithms", package: "swift-async-algorithms"),
            ]
        ),
    ]
)
