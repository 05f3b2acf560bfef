// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "LMDBCache",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "LMDBCache", targets: ["LMDBCache"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            path: "CShims/CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            path: "CShims/CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .target(
            name: "LMDBCache",
            dependencies: [
                "CLMDB",
                "CZlib",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What the tests and their helper process both need to know: sample values and the
        // helper's deterministic write sequence.
        .target(
            name: "CacheTestSupport",
            dependencies: ["LMDBCache"],
            path: "Tests/CacheTestSupport"
        ),
        // A second real process for the multi-process and crash tests.
        .executableTarget(
            name: "cache-test-helper",
            dependencies: ["LMDBCache", "CacheTestSupport"],
            path: "Tests/cache-test-helper"
        ),
        .testTarget(
            name: "LMDBCacheTests",
            dependencies: [
                "LMDBCache", "CacheTestSupport",
                .product(name: "ServiceLifecycleTestKit", package: "swift-service-lifecycle"),
            ]
        ),
        // Concurrency stress over both tiers; CI runs it again under ThreadSanitizer.
        .testTarget(
            name: "LMDBCacheStressTests",
            dependencies: ["LMDBCache"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
