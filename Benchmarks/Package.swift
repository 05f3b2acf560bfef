// swift-tools-version:6.1
import PackageDescription

// The side-by-side harness and the micro-benchmarks, in a package of their own so the library's
// build stays lean: the root package never sees the benchmark dependencies.
let package = Package(
    name: "LMDBCacheBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        // The Redis trait builds LMDBCacheRedis, the remote tier the fleet suite runs its nodes with.
        .package(name: "LMDBCache", path: "..", traits: ["Redis"]),
        // Naming the trait replaces the package's default traits, which on Linux with Swift 6.3
        // would also pull in its ARC runtime interposer.
        .package(url: "https://github.com/ordo-one/benchmark.git", exact: "1.38.1", traits: ["MallocInterposer"]),
        // cache-bench counts the disk tier's access updates through its swift-metrics counter.
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        // The C libraries the peers and trace readers call. The library keeps its own CLMDB and
        // CZlib modules to itself, so the harness declares its own views of LMDB and zlib.
        .systemLibrary(
            name: "CSQLite",
            path: "CShims/CSQLite",
            pkgConfig: "sqlite3",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        // RocksDB's C API (rocksdb/c.h), for the `RocksDB` peer of the disk suite.
        .systemLibrary(
            name: "CRocksDB",
            path: "CShims/CRocksDB",
            pkgConfig: "rocksdb",
            providers: [.apt(["librocksdb-dev"])]
        ),
        .systemLibrary(
            name: "CBenchLMDB",
            path: "CShims/CBenchLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(
            name: "CBenchZlib",
            path: "CShims/CBenchZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // What both the harness and the micro-benchmarks store: deterministic keys and values
        // (100 B and 4 KB JSON-like text, 4 KB random bytes) and the generator behind them.
        .target(
            name: "BenchmarkData",
            path: "Sources/BenchmarkData"
        ),
        // LMDB and zlib called the way a careful C program would: the `LMDB-C` peer of cache-bench
        // and disk-bench's baseline.
        .target(
            name: "RawLMDB",
            dependencies: ["CBenchLMDB", "CBenchZlib"],
            path: "Sources/RawLMDB"
        ),
        // `cache-bench`: LMDBCache beside its peers, same workload, same run, interleaved repeats.
        .executableTarget(
            name: "cache-bench",
            dependencies: [
                "BenchmarkData", "RawLMDB", "CSQLite", "CRocksDB", "CBenchZlib",
                .product(name: "LMDBCache", package: "LMDBCache"),
                .product(name: "LMDBCacheRedis", package: "LMDBCache"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            path: "Sources/cache-bench"
        ),
        // `disk-bench`: the disk tier alone at scale (1M entries, trim latency) beside raw LMDB + zlib.
        .executableTarget(
            name: "disk-bench",
            dependencies: [
                "BenchmarkData", "RawLMDB",
                .product(name: "LMDBCache", package: "LMDBCache"),
            ],
            path: "Sources/disk-bench"
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
        .executableTarget(
            name: "DiskBenchmarks",
            dependencies: [
                "BenchmarkData", "CBenchZlib",
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "LMDBCache", package: "LMDBCache"),
            ],
            path: "Benchmarks/DiskBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
