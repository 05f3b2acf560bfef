// swift-tools-version:6.1
import Foundation
import PackageDescription

// One libFuzzer target per directory under Fuzz/, named fuzz-<directory>: adding a directory adds
// a target, and scripts/fuzz finds it the same way. A plain build makes each a replayer of input
// files; scripts/fuzz builds them with -sanitize=fuzzer,address.
let fuzzDirectory = Context.packageDirectory + "/Fuzz"
let fuzzTargets: [Target] = ((try? FileManager.default.contentsOfDirectory(atPath: fuzzDirectory)) ?? []).sorted()
    .filter { name in
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: fuzzDirectory + "/" + name, isDirectory: &isDirectory)
            && isDirectory.boolValue
    }
    .map { name in
        .executableTarget(name: "fuzz-\(name)", dependencies: ["CacheTestSupport", "RESP"], path: "Fuzz/\(name)")
    }

// Linux only. The library uses Glibc, Linux's open-file-description locks (F_OFD_SETLK),
// /proc/self/fd to reach an opened directory, /proc/sys/kernel/random/boot_id, and Debian's
// liblmdb-dev and libdeflate-dev through system-library targets. So it names no Apple platform: a
// `platforms` line would claim a macOS build that does not exist.
let package = Package(
    name: "LMDBCache",
    products: [
        .library(name: "LMDBCache", targets: ["LMDBCache"]),
        .executable(name: "cache-dump", targets: ["cache-dump"]),
        // The framework integrations. Each is empty unless its package trait is enabled (below).
        .library(name: "LMDBCacheVapor", targets: ["LMDBCacheVapor"]),
        .library(name: "LMDBCacheHummingbird", targets: ["LMDBCacheHummingbird"]),
        // The shared tier across machines: a Redis second level and invalidation over pub/sub.
        // Empty unless the Redis trait is enabled.
        .library(name: "LMDBCacheRedis", targets: ["LMDBCacheRedis"]),
    ],
    // A package that uses only LMDBCache never fetches or builds Vapor or Hummingbird: each
    // integration's framework dependency is conditioned on a trait that is off by default.
    // Enable one on the dependency line: `.package(url: …, from: …, traits: ["Vapor"])`; here,
    // `swift build --traits Vapor,Hummingbird`.
    traits: [
        .trait(name: "Vapor", description: "The LMDBCacheVapor product: Vapor's Cache on the disk tier."),
        .trait(name: "Hummingbird", description: "The LMDBCacheHummingbird product: Hummingbird's PersistDriver on the disk tier."),
        .trait(name: "Redis", description: "The LMDBCacheRedis product: a Redis tier shared by several machines."),
        .default(enabledTraits: []),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/x-sheep/swift-property-based.git", from: "2.0.1"),
        .package(url: "https://github.com/vapor/vapor.git", from: "4.122.3"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            path: "CShims/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(
            name: "CDeflate",
            path: "CShims/CDeflate",
            pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"])]
        ),
        // zlib, for the tests alone: they check that zlib's raw inflate reads a record's value and
        // that a value zlib deflated reads back through the library.
        .systemLibrary(
            name: "CZlib",
            path: "CShims/CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // The storage layer below the library: the only code that names LMDB, its files, locks and
        // the opened directory. The library reaches it through its `package` API; not a product.
        .target(
            name: "LMDBCacheStorage",
            dependencies: [
                "CLMDB",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .target(
            name: "LMDBCache",
            dependencies: [
                "LMDBCacheStorage",
                "CDeflate",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The cache-dump commands, apart from their executable so tests and fuzzing can reach the
        // export-file parser and the argument parsers.
        .target(
            name: "CacheDump",
            dependencies: [
                // LMDBCacheStorage: the names of the store's files (StoreFiles).
                "LMDBCache", "LMDBCacheStorage",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "cache-dump",
            dependencies: ["CacheDump"]
        ),
        // What the tests and their helper process both need to know: sample values and the
        // helper's deterministic write sequence.
        .target(
            name: "CacheTestSupport",
            dependencies: ["LMDBCache", "CacheDump", "RESP"],
            path: "Tests/CacheTestSupport"
        ),
        // A second real process for the multi-process and crash tests.
        .executableTarget(
            name: "cache-test-helper",
            // CLMDB: `hold-writer` holds LMDB's writer lock as another program on the store would,
            // a program that is not LMDBCache: so it names LMDB itself, not through Storage.
            // LMDBCacheRedis: `node`, a machine of a fleet (empty without the Redis trait).
            dependencies: ["LMDBCache", "LMDBCacheRedis", "CacheTestSupport", "CLMDB"],
            path: "Tests/cache-test-helper"
        ),
        // Storage's own tests: its internals, through @testable.
        .testTarget(
            name: "LMDBCacheStorageTests",
            dependencies: ["LMDBCacheStorage"]
        ),
        .testTarget(
            name: "LMDBCacheTests",
            dependencies: [
                // LMDBCacheStorage: only its package API (transactions on a store's environment).
                "LMDBCache", "LMDBCacheStorage", "CacheTestSupport", "CZlib",
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
                // Model-based tests: random operation sequences, shrunk when they fail.
                .product(name: "PropertyBased", package: "swift-property-based"),
            ],
            // Data the tests read through #filePath (a trace excerpt), not bundle resources.
            exclude: ["Resources"]
        ),
        // cache-dump run as a real process against caches the library wrote.
        .testTarget(
            name: "CacheDumpTests",
            // LMDBCacheStorage: its package API (StoreFiles, transactions on a store it opened).
            dependencies: ["CacheDump", "LMDBCache", "LMDBCacheStorage", "CacheTestSupport"]
        ),
        // Concurrency stress over both tiers; CI runs it again under ThreadSanitizer.
        .testTarget(
            name: "LMDBCacheStressTests",
            // LMDBCacheStorage: Locked, its package API.
            dependencies: ["LMDBCache", "LMDBCacheStorage"]
        ),
        // The framework integrations and their tests, built against the frameworks only when
        // the trait is on (the plain CI stage); without it the modules compile empty.
        .target(
            name: "LMDBCacheVapor",
            dependencies: [
                // LMDBCacheStorage: LoggedText, which renders untrusted text in its log messages.
                "LMDBCache", "LMDBCacheStorage",
                .product(name: "Vapor", package: "vapor", condition: .when(traits: ["Vapor"])),
            ]
        ),
        .testTarget(
            name: "LMDBCacheVaporTests",
            dependencies: [
                "LMDBCacheVapor", "CacheTestSupport",
                .product(name: "XCTVapor", package: "vapor", condition: .when(traits: ["Vapor"])),
                // A real HTTP request in flight while the application shuts down.
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(traits: ["Vapor"])),
            ]
        ),
        .target(
            name: "LMDBCacheHummingbird",
            dependencies: [
                "LMDBCache",
                .product(name: "Hummingbird", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                // NIOThreadPool: the disk calls run off Swift's cooperative pool.
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Hummingbird"])),
            ]
        ),
        .testTarget(
            name: "LMDBCacheHummingbirdTests",
            dependencies: [
                "LMDBCacheHummingbird", "CacheTestSupport",
                .product(name: "HummingbirdTesting", package: "hummingbird", condition: .when(traits: ["Hummingbird"])),
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        // RESP2/RESP3, Redis's wire protocol: values, an incremental reply parser that trusts no
        // byte, and the command encoder. No dependencies, so the fuzzer and the tests reach it
        // without the Redis trait.
        .target(name: "RESP"),
        // The Redis tier: a small RESP client on SwiftNIO (Client/) and the remote tier and
        // change feed the core's Cache plugs in (Remote/). Built against NIO only with the trait.
        .target(
            name: "LMDBCacheRedis",
            dependencies: [
                "LMDBCache", "RESP",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["Redis"])),
            ]
        ),
        .testTarget(
            name: "RESPTests",
            dependencies: ["RESP"]
        ),
        // Against real redis-server processes the tests start on loopback ports.
        .testTarget(
            name: "LMDBCacheRedisTests",
            dependencies: [
                "LMDBCacheRedis", "LMDBCache", "RESP", "CacheTestSupport",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(traits: ["Redis"])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(traits: ["Redis"])),
            ]
        ),
    ] + fuzzTargets,
    swiftLanguageModes: [.v6]
)

// CI (scripts/test) builds the example service's sources as a target of this package, in the same
// build as the Hummingbird integration, so that Hummingbird and SwiftNIO are compiled once, not
// again in the example's own package (168 s of CI). Only with LMDBCACHE_EXAMPLE set, and only
// beside the Hummingbird trait, which the example needs. Users build it as its own package.
if ProcessInfo.processInfo.environment["LMDBCACHE_EXAMPLE"] != nil {
    package.dependencies.append(.package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"))
    package.targets.append(
        .executableTarget(
            name: "article-service",
            dependencies: [
                "LMDBCache",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ArticleService/Sources/ArticleService"
        ))
}
