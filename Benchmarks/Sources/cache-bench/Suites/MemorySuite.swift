// The memory suite: `MemoryCache` beside NSCache, a single-lock LRU and a locked Dictionary, on
// warm gets and overwriting sets of String keys, uniform and Zipf, one and two threads.

/// An in-memory cache the memory suite can drive. One file per peer under Systems/.
///
/// Everything a system needs before timing (its key objects, its initial contents) is made
/// outside the measured loops, which call only ``get(_:)`` or ``set(_:forKey:)``.
protocol MemorySystem: AnyObject, Sendable {
    /// The key as the system takes it (`String`, or `NSString` for NSCache), pre-built.
    associatedtype Key

    /// The name in the report.
    static var name: String { get }
    /// One line on what the system is, for the report's legend.
    static var summary: String { get }

    /// An empty cache that holds `capacity` entries without evicting any.
    init(capacity: Int)
    /// Converts a workload key; called before timing.
    static func makeKey(_ key: String) -> Key
    func get(_ key: Key) -> [UInt8]?
    func set(_ value: [UInt8], forKey key: Key)
    /// The number of entries, where the system can tell (a check that nothing was evicted).
    var count: Int? { get }
}

/// The systems the suite runs, the reference (LMDBCache) first. Each entry names its concrete
/// type, so `prepare` and the measured loops are specialized for it (through `any MemorySystem`
/// every get would pay for generic dispatch and a generic key copy).
let memorySystems: [@Sendable (Workload, _ batchSize: Int) -> PreparedMemorySystem] = [
    { LMDBCacheSystem.prepare($0, batchSize: $1) },
    { LMDBCacheLRUSystem.prepare($0, batchSize: $1) },
    { NSCacheSystem.prepare($0, batchSize: $1) },
    { SingleLockLRU.prepare($0, batchSize: $1) },
    { LockedDictionary.prepare($0, batchSize: $1) },
]

enum MemoryOperation: String, CaseIterable, Sendable {
    /// A get of a present key (every key is present and has been read once before timing).
    case get
    /// An insert over a key inserted before timing: the value is replaced, and with every key
    /// still present nothing is added or evicted.
    case set
}

/// A system filled with the workload and ready to be timed; type-erased so the suite can hold a
/// list, while each `run` calls a loop specialized for the concrete system.
struct PreparedMemorySystem {
    let name: String
    let summary: String
    let prefillSeconds: Double
    let count: () -> Int?
    let run: (MemoryOperation, Distribution, _ threads: Int) -> RunSample
}

extension MemorySystem {
    /// Builds the system, converts the keys, inserts every entry and reads every key once.
    static func prepare(_ workload: Workload, batchSize: Int) -> PreparedMemorySystem {
        let system = Self(capacity: workload.entryCount)
        let keys = Unchecked(value: workload.keys.map(Self.makeKey))
        let values = Unchecked(value: workload.values)
        let started = nanosecondsNow()
        for (key, value) in zip(keys.value, values.value) { system.set(value, forKey: key) }
        let prefillSeconds = Double(nanosecondsNow() - started) / 1e9
        var warm = 0
        for key in keys.value { warm &+= system.get(key)?.count ?? 0 }
        blackHole(warm)
        return PreparedMemorySystem(
            name: name, summary: summary, prefillSeconds: prefillSeconds, count: { system.count },
            run: { operation, distribution, threads in
                measure(
                    system, keys: keys, values: values, operation: operation,
                    sequences: workload.sequences[distribution]!, threads: threads,
                    totalOperations: workload.operationsPerRun, batchSize: batchSize)
            })
    }
}

/// One timed run: `threads` threads, each with its own pre-generated key sequence, released
/// together by a barrier; aggregate throughput is all operations over the span from the first
/// thread's start to the last thread's end.
func measure<S: MemorySystem>(
    _ system: S, keys: Unchecked<[S.Key]>, values: Unchecked<[[UInt8]]>, operation: MemoryOperation,
    sequences: [[Int32]],
    threads: Int, totalOperations: Int, batchSize: Int
) -> RunSample {
    precondition(sequences.count >= threads)
    let perThread = totalOperations / threads
    let barrier = SpinBarrier(parties: threads)
    let records = (0..<threads).map { _ in ThreadRecord() }
    onThreads(threads) { thread in
        let record = records[thread]
        keys.value.withUnsafeBufferPointer { keys in
            sequences[thread].withUnsafeBufferPointer { sequence in
                var batchNanos: [UInt64] = []
                batchNanos.reserveCapacity(perThread / batchSize + 1)
                var misses = 0
                var checksum = 0
                barrier.arriveAndWait()
                let start = nanosecondsNow()
                var batchStart = start
                var index = 0
                while index < perThread {
                    let end = min(index + batchSize, perThread)
                    switch operation {
                    case .get:
                        for position in index..<end {
                            if let found = system.get(keys[Int(sequence[position])]) {
                                checksum &+= found.count
                            } else {
                                misses += 1
                            }
                        }
                    case .set:
                        for position in index..<end {
                            let entry = Int(sequence[position])
                            system.set(values.value[entry], forKey: keys[entry])
                        }
                    }
                    let now = nanosecondsNow()
                    batchNanos.append(now - batchStart)
                    batchStart = now
                    index = end
                }
                record.start = start
                record.end = batchStart
                record.batchNanos = batchNanos
                record.misses = misses
                record.checksum = checksum
            }
        }
    }
    let start = records.map(\.start).min()!
    let end = records.map(\.end).max()!
    blackHole(records.reduce(0) { $0 &+ $1.checksum })
    return RunSample(
        operations: perThread * threads, elapsedNanos: end - start, batchNanos: records.flatMap(\.batchNanos),
        batchSize: batchSize, misses: records.reduce(0) { $0 + $1.misses })
}

struct MemorySuite: Suite {
    let name = "memory"

    func run(options: Options, log: (String) -> Void) -> SuiteReport {
        let entries = options.quick ? 100_000 : 1_000_000
        let operations = options.quick ? 100_000 : 1_000_000
        let threadCounts = [1, 2]
        let batchSize = options.batchSize

        log("memory: generating \(entries) keys and \(operations)-operation sequences...")
        let workload = Workload(
            entryCount: entries, operationsPerRun: operations, maxThreads: threadCounts.max()!)
        var systems: [PreparedMemorySystem] = []
        for prepare in memorySystems {
            let prepared = prepare(workload, batchSize)
            let seconds = format(prepared.prefillSeconds, decimals: 2)
            log("memory: \(prepared.name): filled \(entries) entries in \(seconds) s")
            systems.append(prepared)
        }
        let reference = systems[0].name

        var rows: [ResultRow] = []
        for operation in MemoryOperation.allCases {
            for distribution in Distribution.allCases {
                for threads in threadCounts {
                    let cell = Cell(operation: operation, distribution: distribution, threads: threads)
                    let cellRows = measure(
                        cell, systems: systems, repeats: options.repeats(threads: threads), seed: options.seed,
                        batchSize: batchSize)
                    log(
                        "memory: \(cell.label): "
                            + cellRows.map { "\($0.system) \(format($0.opsPerSecond / 1e6, decimals: 2))" }
                            .joined(separator: ", ") + " Mops/s")
                    rows += cellRows
                }
            }
        }

        // A get of an inserted key should hit, and a count limit equal to the entry count should
        // keep every entry: say so where a system did otherwise.
        var warnings: [String] = []
        for row in rows where (row.misses ?? 0) > 0 {
            let operations = operations * options.repeats(threads: row.threads)
            let percent = format(Double(row.misses ?? 0) * 100 / Double(operations), decimals: 2)
            warnings.append(
                "\(row.system) missed \(row.misses ?? 0) of \(operations) gets (\(percent)%) in "
                    + "\(row.workload) \(row.threads)t, though every key was inserted")
        }
        for system in systems {
            if let count = system.count(), count != entries {
                warnings.append(
                    "\(system.name) holds \(count) of the \(entries) entries inserted (count limit \(entries))")
            }
        }
        for warning in warnings { log("memory: WARNING: " + warning) }

        let zipfShare = format(workload.zipfTopPercentShare * 100, decimals: 0)
        return SuiteReport(
            suite: name,
            parameters: [
                ("entries", "\(entries)"),
                ("keys", "String \"key-<n>\", pre-built (NSString for NSCache)"),
                ("value", "a [UInt8] of 100 bytes per key (distinct arrays)"),
                ("operations per run", "\(operations) (split evenly over the threads)"),
                (
                    "repeats",
                    "\(options.repeats(threads: 1)) on 1 thread, \(options.repeats(threads: 2)) on 2; each round runs "
                        + "every system once, in an order drawn from the seed; median and min-max reported"
                ),
                (
                    "distributions",
                    "uniform; Zipf(\(Distribution.zipfExponent)) with ranks permuted "
                        + "(hottest 1% of keys take \(zipfShare)% of draws)"
                ),
            ],
            notes: [
                "ops/s: aggregate throughput of all threads, first start to last end (threads released by a barrier).",
                "p50/p99: per-operation time estimated by timing batches of \(batchSize) operations "
                    + "(batch time / \(batchSize)), over all threads and repeats; not single-operation latencies.",
                "vs \(reference): the median of the system's per-round throughput over \(reference)'s in the same "
                    + "round, with the min-max of those ratios; \"within noise\" when they fall on both sides of 1.",
                "get: every key inserted and read once before timing; set: overwrites an inserted key.",
            ] + systems.map { "\($0.name): \($0.summary)" } + warnings.map { "WARNING: " + $0 },
            rows: rows)
    }

    /// One (operation, distribution, threads) combination.
    struct Cell {
        var operation: MemoryOperation
        var distribution: Distribution
        var threads: Int

        var label: String { "\(workload) \(threads)t" }
        /// The workload's name in the results, e.g. `get zipf`.
        var workload: String { "\(operation.rawValue) \(distribution.rawValue)" }
    }

    /// Runs every system on `cell` `repeats` times, interleaved in seeded orders, and summarizes
    /// each; the first system is the reference for the ratios.
    private func measure(
        _ cell: Cell, systems: [PreparedMemorySystem], repeats: Int, seed: UInt64, batchSize: Int
    ) -> [ResultRow] {
        // Each round runs every system once, in a new order, so drift (clock frequency, a
        // neighbour's load) spreads over all of them; nothing is deferred, so nothing to drain.
        let samples = interleavedRounds(
            systems: systems.count, rounds: repeats, seed: seed, salt: workloadSalt(cell.label)
        ) { index, _ in systems[index].run(cell.operation, cell.distribution, cell.threads) }
        var rows = zip(systems, samples).map { system, runs in
            summarize(
                suite: name, system: system.name, workload: cell.workload, threads: cell.threads, valueBytes: 100,
                runs: runs)
        }
        rows.computeRatios()
        return rows
    }
}
