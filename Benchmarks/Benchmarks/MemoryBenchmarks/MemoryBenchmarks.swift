import Benchmark
import Foundation
import LMDBCache

// Micro-benchmarks of MemoryCache's single-thread paths, above all to show what each operation
// allocates: mallocCountTotal is counted by the malloc interposer and reported per operation
// (the `*` rows: each measured iteration runs `scaledIterations`, 1,000 operations). A hit is
// meant to allocate nothing.
//
//   swift package --disable-sandbox benchmark --target MemoryBenchmarks
//
// Everything is built before the benchmarks run: the cache, its contents and every key (String
// keys of up to 15 UTF-8 bytes are stored inline, so using one allocates nothing either).

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        // scripts/check-allocations sets a small count: allocation counts need few iterations.
        maxIterations: ProcessInfo.processInfo.environment["BENCHMARK_MAX_ITERATIONS"].flatMap { Int($0) } ?? 10_000
    )

    let entries = 100_000
    // No trimming timers: the malloc counter counts every thread, so a timer firing during another
    // benchmark would show up in that benchmark's count.
    var configuration = MemoryCache<String, [UInt8]>.Configuration(countLimit: entries)
    configuration.automaticTrimming = false
    let value = [UInt8](repeating: 0xA5, count: 100)
    let keys = (0..<entries).map { "key-\($0)" }
    let cache = MemoryCache<String, [UInt8]>(configuration: configuration)
    for key in keys { cache.insert(value, forKey: key) }
    // Each shard holds an equal share of the count limit, so a shard that drew more than its
    // share of keys evicted a few: read only keys that are really there.
    let presentKeys = keys.filter { cache.contains($0) }.shuffled()
    let missingKeys = (0..<entries).map { "absent-\($0)" }
    // For inserts that evict: a full cache of `entries`, fed keys it does not hold.
    let evictingCache = MemoryCache<String, [UInt8]>(configuration: configuration)
    for key in keys { evictingCache.insert(value, forKey: key) }
    let newKeys = (0..<(4 * entries)).map { "new-\($0)" }

    /// Index `i` of the measured loop in `iteration` (of 1,000 operations), wrapped to `count`:
    /// each iteration moves on to the next keys instead of re-reading the same thousand.
    @inline(__always)
    func position(_ iteration: Int, _ i: Int, _ count: Int) -> Int {
        (iteration &* BenchmarkScalingFactor.kilo.rawValue &+ i) % count
    }

    Benchmark("MemoryGetHit") { benchmark in
        let iteration = benchmark.currentIteration
        for i in benchmark.scaledIterations {
            blackHole(cache[presentKeys[position(iteration, i, presentKeys.count)]])
        }
    }

    Benchmark("MemoryGetMiss") { benchmark in
        let iteration = benchmark.currentIteration
        for i in benchmark.scaledIterations {
            blackHole(cache[missingKeys[position(iteration, i, missingKeys.count)]])
        }
    }

    // Overwrites: every key is present, so no entry is added or evicted; the replaced value (the
    // same array) is released.
    Benchmark("MemorySet") { benchmark in
        let iteration = benchmark.currentIteration
        for i in benchmark.scaledIterations {
            cache.insert(value, forKey: presentKeys[position(iteration, i, presentKeys.count)])
        }
    }

    // New keys into a full cache: each insert adds an entry and evicts the least recently used one.
    Benchmark("MemoryInsertEvicting") { benchmark in
        let iteration = benchmark.currentIteration
        for i in benchmark.scaledIterations {
            evictingCache.insert(value, forKey: newKeys[position(iteration, i, newKeys.count)])
        }
    }

    // Get-or-load of a key the cache holds in memory: the loader never runs, so this is the cost
    // of `value(forKey:load:)`'s async call over a memory hit. A memory-only Cache, so no disk
    // writer thread allocates behind the counter's back.
    let memoryOnly = Cache<String, [UInt8]>(memory: configuration)
    for key in presentKeys { memoryOnly.insert(value, forKey: key) }
    let cachedKeys = presentKeys.filter { memoryOnly.memory.contains($0) }

    Benchmark("GetOrLoadHit") { benchmark in
        let iteration = benchmark.currentIteration
        for i in benchmark.scaledIterations {
            let key = cachedKeys[position(iteration, i, cachedKeys.count)]
            blackHole(try await memoryOnly.value(forKey: key) { value })
        }
    }

    // The control: one 64-byte array allocated per operation, so a 0 above is the counter
    // seeing no allocation, not a counter that sees nothing.
    Benchmark("MallocCountControl") { benchmark in
        for i in benchmark.scaledIterations {
            blackHole([UInt8](repeating: UInt8(truncatingIfNeeded: i), count: 64))
        }
    }
}
