/// The memory suite: `MemoryCache` beside NSCache, a single-lock LRU and a locked Dictionary, on
/// warm gets and overwriting sets of String keys, uniform and Zipf, one and two threads.

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
    { NSCacheSystem.prepare($0, batchSize: $1) },
    { SingleLockLRU.prepare($0, batchSize: $1) },
    { LockedDictionary.prepare($0, batchSize: $1) },
]

enum MemoryOperation: String, CaseIterable, Sendable {
    /// A get of a present key (every key is present and has been read once before timing).
    case get
    /// An insert over a present key: the value is replaced, nothing is evicted.
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
        let value = workload.value
        let started = nanosecondsNow()
        for key in keys.value { system.set(value, forKey: key) }
        let prefillSeconds = Double(nanosecondsNow() - started) / 1e9
        var warm = 0
        for key in keys.value { warm &+= system.get(key)?.count ?? 0 }
        blackHole(warm)
        return PreparedMemorySystem(
            name: name, summary: summary, prefillSeconds: prefillSeconds, count: { system.count },
            run: { operation, distribution, threads in
                measure(
                    system, keys: keys, value: value, operation: operation,
                    sequences: workload.sequences[distribution]!, threads: threads,
                    totalOperations: workload.operationsPerRun, batchSize: batchSize)
            })
    }
}

/// One timed run: `threads` threads, each with its own pre-generated key sequence, released
/// together by a barrier; aggregate throughput is all operations over the span from the first
/// thread's start to the last thread's end.
func measure<S: MemorySystem>(
    _ system: S, keys: Unchecked<[S.Key]>, value: [UInt8], operation: MemoryOperation, sequences: [[Int32]],
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
                            system.set(value, forKey: keys[Int(sequence[position])])
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
        let operations = options.quick ? 200_000 : 1_000_000
        let threadCounts = [1, 2]
        let batchSize = options.batchSize

        log("memory: generating \(entries) keys and \(operations)-operation sequences...")
        let workload = Workload(
            entryCount: entries, operationsPerRun: operations, maxThreads: threadCounts.max()!)
        var systems: [PreparedMemorySystem] = []
        for prepare in memorySystems {
            let prepared = prepare(workload, batchSize)
            log(
                "memory: \(prepared.name): filled \(entries) entries in "
                    + "\(format(prepared.prefillSeconds, decimals: 2)) s")
            systems.append(prepared)
        }
        let reference = systems[0].name

        var rows: [ResultRow] = []
        for operation in MemoryOperation.allCases {
            for distribution in Distribution.allCases {
                for threads in threadCounts {
                    var samples = [[RunSample]](repeating: [], count: systems.count)
                    // Interleaved: each repeat runs every system once, starting one further along,
                    // so drift (frequency, a neighbour's load) spreads over all of them.
                    for round in 0..<options.repeats {
                        for step in 0..<systems.count {
                            let index = (round + step) % systems.count
                            samples[index].append(systems[index].run(operation, distribution, threads))
                        }
                    }
                    var cellRows: [ResultRow] = []
                    for (index, system) in systems.enumerated() {
                        let runs = samples[index]
                        let misses = runs.reduce(0) { $0 + $1.misses }
                        if misses > 0 {
                            log("memory: WARNING: \(system.name) missed \(misses) gets that should all hit")
                        }
                        let perOperation = runs.flatMap(\.batchNanos)
                        cellRows.append(
                            ResultRow(
                                operation: operation.rawValue, distribution: distribution.rawValue,
                                threads: threads, system: system.name,
                                medianMops: runs.map { $0.operationsPerSecond / 1e6 }.median,
                                runsMops: runs.map { $0.operationsPerSecond / 1e6 },
                                p50Nanos: Double(perOperation.percentile(0.50)) / Double(batchSize),
                                p99Nanos: Double(perOperation.percentile(0.99)) / Double(batchSize),
                                ratioToReference: nil))
                    }
                    let referenceMops = cellRows.first { $0.system == reference }!.medianMops
                    for index in cellRows.indices {
                        cellRows[index].ratioToReference = cellRows[index].medianMops / referenceMops
                    }
                    log(
                        "memory: \(operation.rawValue) \(distribution.rawValue) \(threads)t: "
                            + cellRows.map { "\($0.system) \(format($0.medianMops, decimals: 2))" }
                            .joined(separator: ", ") + " Mops/s")
                    rows += cellRows
                }
            }
        }
        for system in systems {
            if let count = system.count(), count != entries {
                log("memory: WARNING: \(system.name) holds \(count) entries, expected \(entries)")
            }
        }

        return SuiteReport(
            suite: name,
            parameters: [
                "entries": "\(entries)",
                "keys": "String \"key-<n>\", pre-built (NSString for NSCache)",
                "value": "one shared [UInt8] of \(workload.value.count) bytes",
                "operations per run": "\(operations) (split evenly over the threads)",
                "repeats": "\(options.repeats), interleaved; median reported",
                "distributions": "uniform; Zipf(\(Distribution.zipfExponent)) with ranks permuted "
                    + "(hottest 1% of keys take \(format(workload.zipfTopPercentShare * 100, decimals: 0))% of draws)",
            ],
            notes: [
                "Mops/s: aggregate throughput of all threads, first start to last end (threads released by a barrier).",
                "p50/p99: per-operation time estimated by timing batches of \(batchSize) operations "
                    + "(batch time / \(batchSize)), over all threads and repeats; not single-operation latencies.",
                "vs \(reference): the system's median throughput divided by \(reference)'s in the same row group.",
                "get: every key present and read once before timing; set: overwrites a present key, nothing evicted.",
            ] + systems.map { "\($0.name): \($0.summary)" },
            rows: rows)
    }
}
