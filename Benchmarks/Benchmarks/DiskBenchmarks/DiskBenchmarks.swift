import Benchmark
import BenchmarkData
import CBenchZlib
import Foundation
import LMDBCache

// Micro-benchmarks of DiskCache's single-thread paths and of the zlib work under them, above all
// to track what each operation allocates (mallocCountTotal counts every thread's mallocs, the
// writer thread's included). Each measured iteration runs 1,000 operations (`scalingFactor: .kilo`).
//
//   swift package --disable-sandbox benchmark --target DiskBenchmarks
//
// Keys, values and stores are built before the benchmarks start; each store holds 10,000 entries.

let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.wallClock, .throughput, .mallocCountTotal],
        scalingFactor: .kilo,
        maxDuration: .seconds(2),
        // scripts/check-allocations sets a small count: allocation counts need few iterations.
        maxIterations: ProcessInfo.processInfo.environment["BENCHMARK_MAX_ITERATIONS"].flatMap { Int($0) } ?? 200,
        // Each iteration's count includes the writer thread's work, which varies a little with how
        // the queue was batched; reads and zlib allocate the same every time.
        thresholds: [.mallocCountTotal: .init(relative: [.p90: 10])]
    )

    let entries = 10_000
    let keys = makeKeys(count: entries, salt: 0xB3)
    // One fixed directory, emptied first, so runs do not pile up stores in the temp directory.
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("lmdbcache-disk-benchmarks")
    try? FileManager.default.removeItem(at: root)

    /// The names say what each payload is; the pools are `Payload`'s deterministic values.
    let payloads: [(name: String, payload: Payload)] = [
        ("100B", .json100), ("4KBCompressible", .json4K), ("4KBRandom", .random4K),
    ]
    // No trimming timers, and no access times recorded by reads (granularity an hour): the malloc
    // counter counts every thread, and the writer thread committing a read's access time during
    // a later benchmark would land in that benchmark's count. Writes are timed through flush().
    var configuration = DiskCache.Configuration()
    configuration.automaticTrimming = false
    configuration.accessTimeGranularity = .seconds(3_600)
    for (name, payload) in payloads {
        let pool = payload.pool(count: 64, seed: 3)
        let store: DiskCache
        do {
            store = try DiskCache(directory: root.appendingPathComponent(name), configuration: configuration)
            for (index, key) in keys.enumerated() { try store.setData(pool[index % pool.count], forKey: key) }
            try store.flush()
        } catch {
            fatalError("cannot prepare the \(name) store: \(error)")
        }

        // A warm read of a present key: lookup, checksum, inflate where compressed, new array.
        Benchmark("DiskGet\(name)") { benchmark in
            let iteration = benchmark.currentIteration
            for i in benchmark.scaledIterations {
                blackHole(try store.data(forKey: keys[(iteration &* 1_000 &+ i) % entries]))
            }
        }

        // An overwrite of a present key (default durability: encoded, compressed where it helps,
        // queued; the writer thread commits), through flush() at the end of the iteration.
        Benchmark("DiskSet\(name)") { benchmark in
            let iteration = benchmark.currentIteration
            for i in benchmark.scaledIterations {
                let index = (iteration &* 1_000 &+ i) % entries
                try store.setData(pool[(index &+ iteration) % pool.count], forKey: keys[index])
            }
            try store.flush()
        }
    }

    // zlib as the library uses it: raw deflate at level 1 and inflate, each on a stream reused
    // with deflateReset / inflateReset, into a preallocated buffer.
    let json = Payload.json4K.pool(count: 1, seed: 5)[0]
    let random = Payload.random4K.pool(count: 1, seed: 5)[0]
    let compression = ReusedStreams()
    let deflatedJSON = compression.deflatedCopy(of: json)

    Benchmark("ZlibDeflate4KBCompressible") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(compression.deflate(json)) }
    }
    Benchmark("ZlibDeflate4KBRandom") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(compression.deflate(random)) }
    }
    Benchmark("ZlibInflate4KBCompressible") { benchmark in
        for _ in benchmark.scaledIterations { blackHole(compression.inflate(deflatedJSON, length: json.count)) }
    }
}

/// One deflate and one inflate stream, reused across calls, with output buffers of their own.
final class ReusedStreams: @unchecked Sendable {
    private let deflater = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let inflater = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var output = [UInt8](repeating: 0, count: 8_192)

    init() {
        deflater.initialize(to: z_stream())
        inflater.initialize(to: z_stream())
        precondition(bench_deflate_init(deflater, 1) == Z_OK && bench_inflate_init(inflater) == Z_OK)
    }

    /// Raw-deflates `input` into the output buffer; returns the bytes produced.
    func deflate(_ input: [UInt8]) -> Int {
        defer { deflateReset(deflater) }
        return run(deflater, input, CBenchZlib.deflate)
    }

    /// `input` raw-deflated, as a new array (for the inflate benchmark's input).
    func deflatedCopy(of input: [UInt8]) -> [UInt8] {
        Array(output[0..<deflate(input)])
    }

    /// Inflates `input` into the output buffer; returns the bytes produced (`length` when whole).
    func inflate(_ input: [UInt8], length: Int) -> Int {
        defer { inflateReset(inflater) }
        return run(inflater, input, CBenchZlib.inflate)
    }

    private func run(
        _ stream: UnsafeMutablePointer<z_stream>, _ input: [UInt8],
        _ step: (UnsafeMutablePointer<z_stream>?, Int32) -> Int32
    ) -> Int {
        input.withUnsafeBufferPointer { source in
            output.withUnsafeMutableBufferPointer { target in
                stream.pointee.next_in = UnsafeMutablePointer(mutating: source.baseAddress)
                stream.pointee.avail_in = uInt(source.count)
                stream.pointee.next_out = target.baseAddress
                stream.pointee.avail_out = uInt(target.count)
                _ = step(stream, Z_FINISH)
                return target.count - Int(stream.pointee.avail_out)
            }
        }
    }
}
