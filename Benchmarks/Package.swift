// swift-tools-version:6.1
import PackageDescription

// The side-by-side harness and the micro-benchmarks, in a package of their own so the library's
// build stays lean: the root package never sees the benchmark dependencies.
let package = Package(
    name: "LMDBCacheBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "LMDBCache", path: ".."),
        // Naming the trait replaces the package's default traits, which on Linux with Swift 6.3
        // would also pull in its ARC runtime interposer.
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // `cache-bench`: LMDBCache beside its peers, same workload, same run, interleaved repeats.
        .executableTarget(
            name: "cache-bench",
            dependencies: [.product(name: "LMDBCache", package: "LMDBCache")],
            path: "Sources/cache-bench"
        ),
        // package-benchmark micro-benchmarks: wall clock, throughput and malloc counts per operation.
        .executableTarget(
            name: "MemoryBenchmarks",
            dependencies: [
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LMDBCache", package: "LMDBCache"),
            ],
            path: "Benchmarks/MemoryBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
