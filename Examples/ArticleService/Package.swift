// swift-tools-version:6.1
import PackageDescription

// An example service: a Hummingbird app with LMDBCache's get-or-load in front of a slow backend.
// It is a package of its own, depending on the library by path, so the library's build never
// sees Hummingbird. Linux only, like the library: no `platforms` line.
let package = Package(
    name: "ArticleService",
    products: [
        .executable(name: "article-service", targets: ["ArticleService"]),
    ],
    dependencies: [
        .package(name: "LMDBCache", path: "../.."),
        // No traits: the default ones add swift-configuration support, which this example does
        // not use, to the build.
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: []),
        // Already in Hummingbird's graph; named because the example imports them itself.
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
    ],
    targets: [
        .executableTarget(
            name: "ArticleService",
            dependencies: [
                .product(name: "LMDBCache", package: "LMDBCache"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
