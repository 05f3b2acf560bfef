import BenchmarkData
import Foundation
import LMDBCache
import RawLMDB

/// Sizes and round counts of one run.
struct BenchOptions: Sendable {
    /// Smaller sizes and fewer rounds, so the whole run takes well under a minute.
    var quick = false
    /// Where to write the results as JSON, if anywhere.
    var jsonPath: String?
    /// The directory the run's temporary directories go in.
    var parentDirectory = FileManager.default.temporaryDirectory.path
    /// The benchmark groups to run (all by default).
    var groups = Set(BenchGroup.allCases)

    /// Keys of the read and write benchmarks.
    var keys: Int { quick ? 10_000 : 100_000 }
    /// Timed rounds of each read benchmark (after the first pass), reported as their median.
    var readRounds: Int { quick ? 3 : 5 }
    /// Rounds of each write benchmark, each into a new store.
    var writeRounds: Int { 3 }
    /// Writes of the synchronous-durability benchmark (each one commits and syncs).
    var synchronousWrites: Int { quick ? 300 : 2_000 }
    /// Keys of the scale run.
    var scaleKeys: Int { quick ? 50_000 : 1_000_000 }
    /// Read rounds of the scale run.
    var scaleReadRounds: Int { 3 }
}

/// The benchmark groups `--only` can select.
enum BenchGroup: String, CaseIterable, Sendable {
    case read, write, sync, scale, trim
}

/// The temporary directories the stores live in, all under one root that is removed at the end.
final class Workspace {
    let root: String
    private var made = 0

    /// Creates a new root under `parent`.
    init(parent: String) throws {
        root = "\(parent)/disk-bench-\(getpid())-\(Int(Date().timeIntervalSince1970))"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    /// A new empty directory under the root.
    func makeDirectory(_ name: String) throws -> String {
        made += 1
        let path = "\(root)/\(made)-\(name)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Removes the root and everything in it.
    func removeAll() {
        remove(root)
    }
}

/// Runs the workloads, DiskCache beside the raw LMDB + zlib baseline in the same process, and
/// collects the measurements.
///
/// Each benchmark interleaves the systems round by round, so a drift in the machine's speed
/// affects both alike. Progress goes to standard error; the caller prints the results.
final class Suite {
    static let cacheSystem = "DiskCache"
    static let periodicSystem = "DiskCache, periodic sync 1 s"
    static let cacheNoAccessSystem = "DiskCache, granularity 1 h"
    static let rawSystem = "raw LMDB+zlib (C)"
    static let rawUncompressedSystem = "raw LMDB (C)"

    let options: BenchOptions
    let workspace: Workspace
    private(set) var results: [Measurement] = []
    /// Lines printed after the table (the trim benchmark's findings among them).
    var notes: [String] = []
    private let keys: [[UInt8]]
    /// Distinct values per payload; value `i` is `pool[i % poolSize]`.
    private let poolSize = 1_024
    /// zlib level of the baseline, the same as the cache's.
    private let level = Int32(DiskCache.Configuration().compressionLevel)

    init(options: BenchOptions, workspace: Workspace) {
        self.options = options
        self.workspace = workspace
        keys = makeKeys(count: options.keys, salt: 0x5EED)
    }

    /// Runs the selected benchmarks in turn.
    func runAll() throws {
        if options.groups.contains(.read) {
            for payload in [Payload.json4K, .random4K] { try readBenchmark(payload) }
        }
        if options.groups.contains(.write) {
            for payload in Payload.allCases { try writeBenchmark(payload) }
        }
        if options.groups.contains(.sync) { try synchronousBenchmark() }
        if options.groups.contains(.scale) { try scaleBenchmark() }
        if options.groups.contains(.trim) { try trimLatencyBenchmark() }
    }

    // MARK: Reads

    /// Warm lookups of `options.keys` values in shuffled order, against raw `mdb_get` + inflate.
    ///
    /// Reports three things: a first pass made at least a second after the fill, so every
    /// DiskCache read also records its access time (the default granularity is 1 s); the median
    /// of the timed rounds with the default configuration; and the same rounds through a second
    /// handle whose access-time granularity is an hour, which isolates the lookup path.
    func readBenchmark(_ payload: Payload) throws {
        let count = keys.count
        let name = "read \(payload.label) ×\(abbreviated(count))"
        progress("\(name): filling both stores")
        let pool = payload.pool(count: poolSize, seed: 1)

        let cacheDirectory = try workspace.makeDirectory("read-cache-\(payload)")
        defer { workspace.remove(cacheDirectory) }
        let cache = try DiskCache(directory: URL(fileURLWithPath: cacheDirectory))
        defer { cache.close() }
        for index in 0..<count {
            try cache.setData(pool[index % pool.count], forKey: keys[index])
        }
        try cache.flush()
        let filled = ContinuousClock.now
        let cacheFileAfterFill = fileSize("\(cacheDirectory)/data.mdb").size
        try expect(cache.totalCount == count, "\(name): totalCount \(cache.totalCount), expected \(count)")
        var quiet = DiskCache.Configuration()
        quiet.accessTimeGranularity = .seconds(3_600)
        let quietCache = try DiskCache(directory: URL(fileURLWithPath: cacheDirectory), configuration: quiet)
        defer { quietCache.close() }

        let rawDirectory = try workspace.makeDirectory("read-raw-\(payload)")
        defer { workspace.remove(rawDirectory) }
        let raw = try RawLMDB(directory: rawDirectory)
        defer { raw.close() }
        let deflater = try RawDeflater(level: level)
        let stored = try pool.map { try DeflatedValue.encode($0, with: deflater) }
        try raw.put(count: count, perTransaction: 1_000, key: { keys[$0] }, value: { stored[$0 % stored.count] })
        try raw.sync()
        let inflater = try RawInflater()

        // Every DiskCache access time must be at least the granularity (1 s) old.
        let stale = filled + .milliseconds(1_100)
        if ContinuousClock.now < stale { Thread.sleep(forTimeInterval: (stale - ContinuousClock.now).seconds) }
        progress("\(name): first pass, then \(options.readRounds) rounds")
        let firstOrder = shuffledIndices(count: count, seed: 100)
        let cacheFirst = try timeCacheReads(cache, order: firstOrder, valueSize: payload.size)
        let rawFirst = try timeRawReads(raw, inflater, order: firstOrder, valueSize: payload.size)
        try cache.flush()  // commits the access times the reads recorded, untimed
        let cacheFileAfterFirstPass = fileSize("\(cacheDirectory)/data.mdb").size
        try verify(name, count: count, pool: pool, cache: cache, raw: raw, inflater: inflater)

        var cacheRounds: [Double] = []
        var quietRounds: [Double] = []
        var rawRounds: [Double] = []
        for round in 0..<options.readRounds {
            let order = shuffledIndices(count: count, seed: 101 + UInt64(round))
            cacheRounds.append(try timeCacheReads(cache, order: order, valueSize: payload.size))
            try cache.flush()  // commits the access times the reads recorded, untimed
            quietRounds.append(try timeCacheReads(quietCache, order: order, valueSize: payload.size))
            rawRounds.append(try timeRawReads(raw, inflater, order: order, valueSize: payload.size))
        }
        let cacheFile = fileSize("\(cacheDirectory)/data.mdb").size
        let rawFile = fileSize("\(rawDirectory)/data.mdb").size
        notes.append(
            "\(name): DiskCache totalCost \(formatBytes(cache.totalCost)) (\(cache.totalCost / count) B an entry), "
                + "data.mdb \(formatBytes(cacheFileAfterFill)) after the fill, \(formatBytes(cacheFileAfterFirstPass)) "
                + "after the 1st pass, \(formatBytes(cacheFile)) at the end; raw: "
                + "\(stored.map(\.count).reduce(0, +) / stored.count) B a value, data.mdb \(formatBytes(rawFile))")

        addPair(
            Measurement(
                workload: "\(name), 1st pass", system: Self.cacheSystem, operations: count, rounds: [cacheFirst]),
            Measurement(workload: "\(name), 1st pass", system: Self.rawSystem, operations: count, rounds: [rawFirst]))
        let rawMeasurement = Measurement(workload: name, system: Self.rawSystem, operations: count, rounds: rawRounds)
        add(
            Measurement(workload: name, system: Self.cacheSystem, operations: count, rounds: cacheRounds),
            baseline: rawMeasurement)
        addPair(
            Measurement(workload: name, system: Self.cacheNoAccessSystem, operations: count, rounds: quietRounds),
            rawMeasurement)
    }

    /// Nanoseconds per `data(forKey:)` over `order`; checks every lookup hits.
    private func timeCacheReads(_ cache: DiskCache, order: [Int], valueSize: Int) throws -> Double {
        var bytes = 0
        let nanoseconds = try measure(operations: order.count) {
            for index in order {
                if let value = try cache.data(forKey: keys[index]) { bytes &+= value.count }
            }
        }
        try expect(
            bytes == order.count * valueSize, "DiskCache read \(bytes) bytes, expected \(order.count * valueSize)")
        return nanoseconds
    }

    /// Nanoseconds per raw lookup (renew, `mdb_get`, inflate into a new array, reset) over `order`.
    private func timeRawReads(_ raw: RawLMDB, _ inflater: RawInflater, order: [Int], valueSize: Int) throws -> Double {
        var bytes = 0
        let nanoseconds = try measure(operations: order.count) {
            for index in order {
                let value = try raw.withValue(forKey: keys[index]) { DeflatedValue.decode($0, with: inflater) } ?? nil
                if let value { bytes &+= value.count }
            }
        }
        try expect(bytes == order.count * valueSize, "raw read \(bytes) bytes, expected \(order.count * valueSize)")
        return nanoseconds
    }

    /// Checks (untimed) that both stores return exactly the values written.
    private func verify(
        _ name: String, count: Int, pool: [[UInt8]], cache: DiskCache, raw: RawLMDB, inflater: RawInflater
    ) throws {
        for index in 0..<count {
            let expected = pool[index % pool.count]
            try expect(try cache.data(forKey: keys[index]) == expected, "\(name): DiskCache returned a wrong value")
            let rawValue = try raw.withValue(forKey: keys[index]) { DeflatedValue.decode($0, with: inflater) } ?? nil
            try expect(rawValue == expected, "\(name): raw LMDB returned a wrong value")
        }
    }

    // MARK: Writes

    /// Sustained `setData` of `options.keys` values into a new store (default configuration,
    /// batched durability), timed from the first call until `flush()` returns; against raw puts,
    /// 1000 to a transaction, uncompressed, `MDB_NOSYNC`, then one `mdb_env_sync`.
    func writeBenchmark(_ payload: Payload) throws {
        let count = keys.count
        let name = "write \(payload.label) ×\(abbreviated(count))"
        progress("\(name): \(options.writeRounds) rounds")
        let pool = payload.pool(count: poolSize, seed: 2)
        var cacheRounds: [Double] = []
        var periodicRounds: [Double] = []
        var rawRounds: [Double] = []
        var periodic = DiskCache.Configuration()
        periodic.durability = .periodic(syncInterval: .seconds(1))
        for _ in 0..<options.writeRounds {
            cacheRounds.append(try timeCacheWrites(name, keys: keys, pool: pool, configuration: .init()))
            periodicRounds.append(try timeCacheWrites(name, keys: keys, pool: pool, configuration: periodic))
            rawRounds.append(
                try timeRawWrites(name, keys: keys, pool: pool, flags: RawLMDB.batchedFlags, perTransaction: 1_000))
        }
        let baseline = Measurement(
            workload: name, system: Self.rawUncompressedSystem, operations: count, rounds: rawRounds)
        add(
            Measurement(workload: name, system: Self.cacheSystem, operations: count, rounds: cacheRounds),
            baseline: baseline)
        addPair(
            Measurement(workload: name, system: Self.periodicSystem, operations: count, rounds: periodicRounds),
            baseline)
    }

    /// `.synchronous` durability, each `setData` committed and synced before it returns; against
    /// raw LMDB with one put per commit and full sync on commit (no `MDB_NOSYNC`).
    func synchronousBenchmark() throws {
        let count = options.synchronousWrites
        let payload = Payload.json100
        let name = "write \(payload.label) ×\(abbreviated(count)), synchronous"
        progress("\(name): \(options.writeRounds) rounds")
        let pool = payload.pool(count: poolSize, seed: 3)
        let someKeys = Array(keys.prefix(count))
        var configuration = DiskCache.Configuration()
        configuration.durability = .synchronous
        var cacheRounds: [Double] = []
        var rawRounds: [Double] = []
        for _ in 0..<options.writeRounds {
            cacheRounds.append(try timeCacheWrites(name, keys: someKeys, pool: pool, configuration: configuration))
            rawRounds.append(
                try timeRawWrites(name, keys: someKeys, pool: pool, flags: RawLMDB.synchronousFlags, perTransaction: 1))
        }
        addPair(
            Measurement(workload: name, system: Self.cacheSystem, operations: count, rounds: cacheRounds),
            Measurement(workload: name, system: "raw LMDB (C), 1 put/commit", operations: count, rounds: rawRounds))
    }

    /// Nanoseconds per write of `keys` into a new DiskCache, through `flush()`.
    private func timeCacheWrites(
        _ name: String, keys: [[UInt8]], pool: [[UInt8]], configuration: DiskCache.Configuration
    ) throws -> Double {
        let directory = try workspace.makeDirectory("write-cache")
        defer { workspace.remove(directory) }
        let cache = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { cache.close() }
        let nanoseconds = try measure(operations: keys.count) {
            for index in keys.indices {
                try cache.setData(pool[index % pool.count], forKey: keys[index])
            }
            try cache.flush()
        }
        try expect(cache.totalCount == keys.count, "\(name): totalCount \(cache.totalCount), expected \(keys.count)")
        return nanoseconds
    }

    /// Nanoseconds per raw put of `keys` into a new environment, through a final `mdb_env_sync`.
    private func timeRawWrites(
        _ name: String, keys: [[UInt8]], pool: [[UInt8]], flags: Int32, perTransaction: Int
    ) throws -> Double {
        let directory = try workspace.makeDirectory("write-raw")
        defer { workspace.remove(directory) }
        let raw = try RawLMDB(directory: directory, flags: flags)
        defer { raw.close() }
        return try measure(operations: keys.count) {
            try raw.put(
                count: keys.count, perTransaction: perTransaction, key: { keys[$0] }, value: { pool[$0 % pool.count] })
            try raw.sync()
        }
    }

    // MARK: Scale

    /// Many 100-byte inserts into one store (timed through `flush()`), then lookups of every key
    /// in shuffled order; reports totals and the file's size, beside raw LMDB doing the same.
    func scaleBenchmark() throws {
        let count = options.scaleKeys
        let payload = Payload.json100
        let insertName = "scale: insert \(payload.label) ×\(abbreviated(count))"
        let readName = "scale: read \(payload.label) ×\(abbreviated(count))"
        progress("\(insertName), then \(options.scaleReadRounds) read rounds")
        let scaleKeys = makeKeys(count: count, salt: 0x5CA1E)
        let pool = payload.pool(count: poolSize, seed: 4)

        let cacheDirectory = try workspace.makeDirectory("scale-cache")
        defer { workspace.remove(cacheDirectory) }
        let cache = try DiskCache(directory: URL(fileURLWithPath: cacheDirectory))
        defer { cache.close() }
        let periodicDirectory = try workspace.makeDirectory("scale-periodic")
        defer { workspace.remove(periodicDirectory) }
        var periodic = DiskCache.Configuration()
        periodic.durability = .periodic(syncInterval: .seconds(1))
        let periodicCache = try DiskCache(directory: URL(fileURLWithPath: periodicDirectory), configuration: periodic)
        let periodicInsert = try measure(operations: count) {
            for index in 0..<count {
                try periodicCache.setData(pool[index % pool.count], forKey: scaleKeys[index])
            }
            try periodicCache.flush()
        }
        periodicCache.close()
        let cacheInsert = try measure(operations: count) {
            for index in 0..<count {
                try cache.setData(pool[index % pool.count], forKey: scaleKeys[index])
            }
            try cache.flush()
        }
        var cacheFileSizes = [fileSize("\(cacheDirectory)/data.mdb").size]
        let rawDirectory = try workspace.makeDirectory("scale-raw")
        defer { workspace.remove(rawDirectory) }
        let raw = try RawLMDB(directory: rawDirectory)
        defer { raw.close() }
        let rawInsert = try measure(operations: count) {
            try raw.put(count: count, perTransaction: 1_000, key: { scaleKeys[$0] }, value: { pool[$0 % pool.count] })
            try raw.sync()
        }

        var cacheRounds: [Double] = []
        var rawRounds: [Double] = []
        for round in 0..<options.scaleReadRounds {
            let order = shuffledIndices(count: count, seed: 200 + UInt64(round))
            var cacheBytes = 0
            cacheRounds.append(
                try measure(operations: count) {
                    for index in order {
                        if let value = try cache.data(forKey: scaleKeys[index]) { cacheBytes &+= value.count }
                    }
                })
            try cache.flush()  // commits the access times the reads recorded, untimed
            var rawBytes = 0
            rawRounds.append(
                try measure(operations: count) {
                    for index in order {
                        // 100-byte values are below the compression threshold: a plain copy.
                        if let value = try raw.withValue(forKey: scaleKeys[index], Array.init) {
                            rawBytes &+= value.count
                        }
                    }
                })
            try expect(cacheBytes == count * payload.size, "\(readName): DiskCache read \(cacheBytes) bytes")
            try expect(rawBytes == count * payload.size, "\(readName): raw read \(rawBytes) bytes")
            cacheFileSizes.append(fileSize("\(cacheDirectory)/data.mdb").size)
        }
        try expect(cache.totalCount == count, "\(insertName): totalCount \(cache.totalCount), expected \(count)")

        let rawInsertMeasurement = Measurement(
            workload: insertName, system: Self.rawUncompressedSystem, operations: count, rounds: [rawInsert])
        add(
            Measurement(workload: insertName, system: Self.cacheSystem, operations: count, rounds: [cacheInsert]),
            baseline: rawInsertMeasurement)
        addPair(
            Measurement(workload: insertName, system: Self.periodicSystem, operations: count, rounds: [periodicInsert]),
            rawInsertMeasurement)
        addPair(
            Measurement(workload: readName, system: Self.cacheSystem, operations: count, rounds: cacheRounds),
            Measurement(workload: readName, system: Self.rawUncompressedSystem, operations: count, rounds: rawRounds))
        let rawFile = fileSize("\(rawDirectory)/data.mdb").size
        notes.append(
            "scale ×\(abbreviated(count)) DiskCache: totalCount \(cache.totalCount), totalCost \(cache.totalCost) "
                + "(\(formatBytes(cache.totalCost))); data.mdb after the inserts, then after each read round: "
                + cacheFileSizes.map(formatBytes).joined(separator: ", "))
        notes.append("scale ×\(abbreviated(count)) raw LMDB: data.mdb \(rawFile) bytes (\(formatBytes(rawFile)))")
    }

    // MARK: Helpers

    /// Appends `cache` with its ratio to `baseline`, then `baseline`.
    private func addPair(_ cache: Measurement, _ baseline: Measurement) {
        add(cache, baseline: baseline)
        results.append(baseline)
    }

    private func add(_ cache: Measurement, baseline: Measurement) {
        var cache = cache
        cache.ratio = cache.operationsPerSecond / baseline.operationsPerSecond
        results.append(cache)
    }
}

/// Runs `body` once; returns its wall-clock nanoseconds divided by `operations`.
func measure(operations: Int, _ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    let elapsed = ContinuousClock.now - start
    return elapsed.seconds * 1e9 / Double(max(operations, 1))
}

extension Duration {
    /// The duration in seconds, as a Double.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) * 1e-18
    }
}

/// Throws `message` unless `condition` holds.
func expect(_ condition: Bool, _ message: @autoclosure () -> String) throws {
    guard condition else { throw BenchError(description: message()) }
}

/// `100000` as `100k`, `1000000` as `1M`.
func abbreviated(_ count: Int) -> String {
    if count >= 1_000_000 && count % 1_000_000 == 0 { return "\(count / 1_000_000)M" }
    if count >= 1_000 && count % 1_000 == 0 { return "\(count / 1_000)k" }
    return "\(count)"
}

/// The apparent size of the file at `path` and the bytes it occupies on disk (0 when missing).
func fileSize(_ path: String) -> (size: Int, allocated: Int) {
    var info = stat()
    guard stat(path, &info) == 0 else { return (0, 0) }
    return (Int(info.st_size), Int(info.st_blocks) * 512)
}

/// A progress line on standard error (standard output carries only the report).
func progress(_ message: String) {
    FileHandle.standardError.write(Data("disk-bench: \(message)\n".utf8))
}
