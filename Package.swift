// swift-tools-version:6.1
import PackageDescription

// Release builds of the server's targets (KVOModel, KVOEngine, KVOServer) skip the run-time exclusivity
// checks (`swift_beginAccess` on every access to a class's stored property: about 8 % of a `set`'s
// instructions, docs/performance.md). Debug builds, which every test runs, keep them, and so does the thread
// sanitizer run. Only these targets: a package that depends on the client library (KVOClient, KVOJSON) sees
// no unsafe flag; one that embeds the KVOServer library by version would (SwiftPM refuses unsafe flags there).
// They also make every body of these modules available to the others for inlining (`-cross-module-optimization`,
// not only the public ones SwiftPM's default serialises): the engine's module edge then costs about 0.6 % of a
// set instead of 1-1.3 % (docs/performance.md, "Issue 25").
let serverSwiftSettings: [SwiftSetting] = [
    .unsafeFlags(["-enforce-exclusivity=unchecked", "-cross-module-optimization"], .when(configuration: .release))
]

// `KVOD_TEST_SCOPE=tsan` (set by scripts/test-tsan.sh, nowhere else): the test targets hold only the tests the
// ThreadSanitizer run runs, the client library's (KVOClientTests, with KVOTestSupport) and the server's one
// thread hand-over at start-up (ObjectTableFillerTests in KVOServerTests; IntegrationTests is left out), so
// that its separate build (.build-tsan) compiles about 35 test files instead of about 200: the test targets'
// compile is most of a build's time. Every other build, `swift test` and CI's test stage included, sees every test.
let tsanScope = Context.environment["KVOD_TEST_SCOPE"] == "tsan"

let package = Package(
    name: "kvod",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "kvod", targets: ["kvod"]),
        .executable(name: "kvoclient", targets: ["kvoclient"]),
        .library(name: "KVOServer", targets: ["KVOServer"]),
        .library(name: "KVOClient", targets: ["KVOClient"]),
        .library(name: "KVOJSON", targets: ["KVOJSON"]),
    ],
    // Exact versions, so that every build (the Docker image's included) resolves the same code without a
    // Package.resolved in the repository (it stays out: a local package mirror has commit ids of its
    // own). swift-argument-parser and swift-log have no dependencies of their own. To update, change the version
    // here. (examples/combine, which uses swift-async-algorithms, is a package of its own: see its Package.swift.)
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", exact: "1.16.2"),
    ],
    targets: [
        // libuv from the system (Debian: libuv1-dev). Module map and shim header only.
        .systemLibrary(
            name: "CLibUV",
            pkgConfig: "libuv",
            providers: [.apt(["libuv1-dev"]), .brew(["libuv"])]
        ),
        // SQLite 3 from the system (Debian: libsqlite3-dev), for the persistent store. Module map and shim header only.
        .systemLibrary(
            name: "CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]
        ),
        // PCRE2 (8-bit) from the system (Debian: libpcre2-dev), for class `pattern` rules with bounded
        // matching. Module map and shim header only.
        .systemLibrary(
            name: "CPCRE2",
            pkgConfig: "libpcre2-8",
            providers: [.apt(["libpcre2-dev"]), .brew(["pcre2"])]
        ),
        // OpenSSL 3 from the system (Debian: libssl-dev), for TLS on the listener and in the client. Module
        // map and a shim header for the macros Swift cannot import.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        // libsodium from the system (Debian: libsodium-dev), for password hashes (Argon2id) and API
        // token hashes (BLAKE2b). Module map and shim header only.
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"]), .brew(["libsodium"])]
        ),
        // The HTTP/1.1 request parser (Debian: libhttp-parser-dev 2.9.4) for the HTTP listener, and RFC 6455
        // WebSocket framing (Debian: libwslay-dev 1.1.1). Neither ships a pkg-config file: the module maps
        // name the libraries (docs/design.md, "HTTP and WebSocket").
        .systemLibrary(
            name: "CHTTPParser",
            providers: [.apt(["libhttp-parser-dev"]), .brew(["http-parser"])]
        ),
        .systemLibrary(
            name: "CWSLay",
            providers: [.apt(["libwslay-dev"]), .brew(["wslay"])]
        ),
        // The NATS C client with JetStream (Debian: libnats-dev 3.4.1), for the cluster's replication stream
        // (`--cluster`; docs/design.md, "Cluster"). Module map and shim header only.
        .systemLibrary(
            name: "CNATS",
            pkgConfig: "libnats",
            providers: [.apt(["libnats-dev"]), .brew(["cnats"])]
        ),
        // JSON values, parser and encoder shared by the server and the client. No dependencies.
        .target(name: "KVOJSON"),
        // The build tool and plugin that compile the inspector page and the JavaScript client
        // (Sources/KVOServer/HTTP/Assets) into the server at build time: no generated file is checked in.
        .executableTarget(name: "embed-web-assets", path: "Plugins/EmbedWebAssets"),
        .plugin(name: "WebAssetsPlugin", capability: .buildTool(), dependencies: ["embed-web-assets"]),
        // The server's shared vocabulary (docs/design.md, "Layers"): errors, connection and subscription ids,
        // id limits, stored locations, object id patterns, change kinds and reasons, recorded changes and their
        // JSON form. Values only: no I/O, no engine.
        .target(name: "KVOModel", dependencies: ["KVOJSON"], swiftSettings: serverSwiftSettings),
        // The engine (pure): objects, key paths, observations, history, classes, expressions, bindings and
        // the access checks it applies. No sockets, no storage, no wire format, no clock, no logging
        // (scripts/check-layers.sh checks the imports the target graph cannot forbid).
        .target(name: "KVOEngine", dependencies: ["CPCRE2", "KVOJSON", "KVOModel"], swiftSettings: serverSwiftSettings),
        // The server (the engine is KVOEngine): Protocol (JSON lines), Transport (libuv), Storage (SQLite), Security
        // (users, password and token checks, access rules; libsodium), HTTP (WebSocket, metrics, and the
        // inspector page and JavaScript client, embedded from HTTP/Assets at build time by WebAssetsPlugin).
        .target(
            name: "KVOServer",
            dependencies: [
                "CHTTPParser",
                "CLibUV",
                "CNATS",
                "COpenSSL",
                "CSQLite",
                "CSodium",
                "CWSLay",
                "KVOEngine",
                "KVOJSON",
                "KVOModel",
                "KVOVersion",
                .product(name: "Logging", package: "swift-log"),
            ],
            exclude: ["HTTP/Assets"],
            swiftSettings: serverSwiftSettings,
            plugins: ["WebAssetsPlugin"]
        ),
        // Command-line argument parsing shared by kvod and kvoclient (numbers with clear messages). No dependencies.
        .target(name: "KVOCommandLine"),
        // kvod's version, the one place it is written (`--version` of kvod and kvoclient, `hello`, the start-up log
        // line, `kvod_build_info`). No dependencies.
        .target(name: "KVOVersion"),
        // The git commit kvod is built from (`kvod_build_info{commit}`, `kvod --version`), generated from the
        // checkout's HEAD by GitCommitPlugin; "unknown" without a .git. Imported by the executables only, so that
        // a new commit recompiles this target and relinks them, never the server's modules.
        .target(name: "KVOBuildCommit", plugins: ["GitCommitPlugin"]),
        .executableTarget(name: "git-commit-file", path: "Plugins/GitCommitFile"),
        .plugin(name: "GitCommitPlugin", capability: .buildTool(), dependencies: ["git-commit-file"]),
        // The Swift client library: async requests and observations as AsyncSequences over one shared,
        // pipelined connection, with reconnection, heartbeat, TLS and credentials. Also the one client TLS
        // implementation (KVOWireProbe uses it).
        .target(name: "KVOClient", dependencies: ["COpenSSL", "KVOJSON"]),
        // Not a client library (not a product): a raw JSON-lines socket probe for the tests and kvod-bench,
        // which sends bytes as they are (malformed ones included) and reads lines. Its TLS is KVOClient's.
        .target(name: "KVOWireProbe", dependencies: ["COpenSSL", "KVOJSON", "KVOClient"]),
        .executableTarget(
            name: "kvod",
            dependencies: [
                "KVOServer",
                "KVOBuildCommit",
                "KVOCommandLine",
                "KVOEngine",
                "KVOJSON",
                "KVOVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "kvoclient",
            dependencies: [
                "KVOBuildCommit",
                "COpenSSL",
                "KVOClient",
                "KVOCommandLine",
                "KVOJSON",
                "KVOVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Benchmarks that print figures (docs/performance.md); no dependencies beyond the server and the clients.
        .executableTarget(name: "kvod-bench", dependencies: ["KVOServer", "KVOEngine", "KVOModel", "KVOJSON", "KVOWireProbe", "KVOClient"]),
        // Programs using the KVOClient library (examples/README.md), built by CI so that they keep compiling.
        .executableTarget(name: "kvod-mirror", dependencies: ["KVOClient"], path: "examples/mirror"),
        // Top-level code breaking out of observation loops (withObservation, cancel(), a plain loop), run by
        // KVOClientScopedObservationTests against a real kvod.
        .executableTarget(name: "kvod-observe-break", dependencies: ["KVOClient"], path: "examples/observe-break"),
        // Test targets follow the module targets (docs/design.md, "CI"): each tests one side and depends on that side
        // only, so that a change to the client library rebuilds and reruns the client's tests and the integration
        // tests, never the server's, and a change to the server's modules never rebuilds the client's.
        // KVOServerTests: the server's modules in-process (engine, codec, operations table, stores, servers driven
        // over EmbeddedConnection or loopback sockets); nothing of the client side.
        .testTarget(name: "KVOServerTests", dependencies: ["KVOServer", "KVOEngine", "KVOModel", "KVOJSON"],
                    sources: tsanScope ? ["ObjectTableFillerTests.swift", "Support/SplitMix64.swift", "Support/ExpectEqual.swift"] : nil),
        // KVOClientTests: the Swift client library against the real kvod (started as a process); nothing of the
        // server's modules.
        .testTarget(name: "KVOClientTests", dependencies: ["KVOClient", "KVOJSON", "KVOWireProbe", "KVOTestSupport"]),
        // IntegrationTests: the built kvod and kvoclient over TCP, TLS and Unix sockets: the protocol, storage,
        // security, the CLI and the cluster.
        .testTarget(name: "IntegrationTests",
                    dependencies: ["KVOClient", "KVOWireProbe", "KVOJSON", "CSQLite", "KVOServer", "KVOTestSupport"]),
        // The support code KVOClientTests and IntegrationTests share: starting the built kvod and kvoclient
        // (KVODProcess, KVOClientProcess, KVODUserTool), stand-ins for a server and the network (ScriptedKVOD,
        // TCPProxy), test certificates and JSON-lines helpers. A plain target (a test target cannot depend on
        // another); the tests import it `@testable` (debug builds enable testing in every module), so it keeps
        // internal access. The client side only: KVOServerTests does not use it.
        .target(name: "KVOTestSupport", dependencies: ["KVOJSON", "KVOWireProbe"], path: "Tests/Support"),
    ]
)

// The ThreadSanitizer build (`KVOD_TEST_SCOPE=tsan`) also leaves out the integration tests and the programs its
// tests never start: kvoclient, the benchmark and examples/mirror. kvod and examples/observe-break stay (the
// client's tests run them).
if tsanScope {
    let unused: Set<String> = ["IntegrationTests", "kvoclient", "kvod-bench", "kvod-mirror"]
    package.targets.removeAll { unused.contains($0.name) }
    package.products.removeAll { unused.contains($0.name) }
}
