import Dispatch
import Foundation
import Synchronization

/// A family of measurements run together (`memory`, `disk`, `tiered`, `hitrate`), each with its
/// own protocol for the systems it compares (``MemorySystem``, ``DiskSystem``, ...).
protocol Suite {
    /// The name `--suite` selects it by.
    var name: String { get }
    /// Runs every measurement of the suite, printing progress through `log`.
    func run(options: Options, log: (String) -> Void) throws -> SuiteReport
}

/// Settings from the command line that every suite reads.
struct Options: Sendable {
    /// Small data sets and few repeats: a whole run well under a minute.
    var quick = false
    /// Where to write the results as JSON, if anywhere.
    var jsonPath: String?
    /// Where to write `report.md` and one SVG chart per suite, if anywhere.
    var reportDirectory: String?
    /// Traces to replay instead of the bundled ones, in order (each `--trace` with the
    /// `--trace-format` and `--sizes` after it); empty: every bundled trace.
    var traces: [TraceRequest] = []
    /// Where the disk, tiered, coherence and fleet suites create their stores (removed at the end).
    var scratchDirectory = FileManager.default.temporaryDirectory.path
    /// Draws each round's order of systems (`--seed`; by default a new one each run, printed).
    var seed = UInt64.random(in: 0...UInt64.max)
    /// Interleaved repeats of each measurement: 5 (10 for two-thread rows, whose spread is wider);
    /// 3 with `--quick`. The report gives their median and range.
    func repeats(threads: Int = 1) -> Int { quick ? 3 : threads > 1 ? 10 : 5 }
    /// The disk suite's workloads to run (`--workloads`); nil runs them all.
    var workloads: Set<String>?
    /// The disk suite's systems to run (`--systems`: label prefixes); nil runs them all.
    var systems: [String]?
    /// Operations timed together for the memory suite's latency estimate.
    let batchSize = 1_000
}

/// What one suite measured, ready for the text table, the report and the JSON file.
struct SuiteReport: Sendable {
    var suite: String
    /// Workload facts for the header: entry count, operations per run, value size, ...
    var parameters: [(String, String)]
    /// Free-form lines printed under the table (how latency was estimated, ...).
    var notes: [String]
    var rows: [ResultRow]
    /// Tables printed after the main one.
    var extraTables: [ExtraTable] = []
    /// Rows of the JSON output that the main table leaves out (one of ``extraTables`` shows them):
    /// the tiered suite's loading section.
    var extraRows: [ResultRow] = []
}

/// One system's result on one workload: a row of the table and an element of the JSON
/// `results` array. The first ten fields are the JSON schema the issue fixes; the rest are extras.
struct ResultRow: Codable, Sendable {
    /// `memory`, `disk`, `tiered`, `hitrate`, `coherence` or `fleet`.
    var suite: String
    /// `LMDBCache` or a peer's name, exactly as Performance.md (LMDBCache.docc) lists them.
    var system: String
    /// What was run, e.g. `get zipf`, `set`, `set synchronous`, or the trace's name.
    var workload: String
    var threads: Int
    /// Bytes per value (0 where values do not matter, as in hit-rate replays).
    var valueBytes: Int
    /// Median over the repeats of the aggregate throughput.
    var opsPerSecond: Double
    /// Median and 99th percentile of the time per operation (see the suite's notes for how).
    var p50Nanoseconds: Double
    var p99Nanoseconds: Double
    /// Hit-rate suite: the cache's capacity (entries, or bytes for byte-bounded traces).
    var capacity: Int?
    /// Hit-rate suite: hits over requests, 0–1; tiered suite: lookups served by either tier.
    var hitRatio: Double?

    /// Hit-rate suite: `entries` or `bytes`, what ``capacity`` counts.
    var capacityUnit: String?
    /// How the system was driven when it matters, e.g. `pipelined 100` (Redis) or `shards 1`.
    var variant: String?
    /// This row's throughput over LMDBCache's on the same workload: the median of the ratios
    /// taken round by round (hit-rate suite: hit ratio over LMDBCache's).
    var ratioToLMDBCache: Double?
    /// The smallest and largest of the per-round ratios.
    var ratioMin: Double?
    var ratioMax: Double?
    /// Whether the per-round ratios fall on both sides of 1: the order against LMDBCache is
    /// not settled by this run.
    var withinNoise: Bool?
    /// Disk suite: what the values are, `json` (JSON-like text) or `random` (incompressible).
    var valueKind: String?
    /// Disk suite: when a write is on stable storage (`on return`, `per batch`, `at the end`,
    /// `never`), how values are compressed, and the store's bytes on disk after its fill.
    var durable: String?
    var compression: String?
    var bytesOnDisk: Int?
    /// LMDBCache rows of the disk suite: CPU time its writer thread spent per operation (the
    /// run and the drain after it), nanoseconds, median over the rounds.
    var writerCPUNanosecondsPerOperation: Double?
    /// LMDBCache rows of the disk suite: access updates committed per operation (each moves one entry
    /// in the access order: two small LMDB writes), median over the rounds.
    var accessUpdatesPerOperation: Double?
    /// Read-while-writing workload: writes per second the writer thread committed meanwhile.
    var concurrentWritesPerSecond: Double?
    /// Disk suite, stores on local files: bytes the process caused to be written to storage per
    /// operation over the run and the drain after it (``ProcessWrites``), median over the rounds.
    var bytesWrittenPerOperation: Double?
    /// Every repeat's throughput, in run order.
    var runsOpsPerSecond: [Double] = []
    /// Tiered suite: lookups the memory tier served, and the share of its misses the disk served.
    var memoryHitRatio: Double?
    var diskHitRatio: Double?
    /// Hit-rate suite: the published figure for the same policy, trace and capacity, 0–1.
    var referenceHitRatio: Double?
    /// Lookups of keys that should have been present but were not, over all repeats.
    var misses: Int?
    /// Tiered suite's loading rows: the 99.9th percentile of the time per call.
    var p999Nanoseconds: Double?
    /// Tiered suite's loading rows: get-or-load calls made, and the share that returned a value
    /// rather than throwing (0–1).
    var calls: Int?
    var answeredRatio: Double?
    /// Tiered suite's loading rows: the cache's counts over the row's span (`CacheStatistics`):
    /// loader runs, those that threw, background refreshes that stored a value and that threw,
    /// stale values served because the loader threw or was too slow, waits that ended with
    /// `CacheError.loadTimedOut`.
    var loads: Int?
    var loadFailures: Int?
    var refreshes: Int?
    var refreshFailures: Int?
    var staleServedOnError: Int?
    var staleServedOnTimeout: Int?
    var loadTimeouts: Int?
    /// Fleet suite: Redis as the only cache's p50 (p99) on the same workload over this row's (above
    /// 1: faster than Redis alone).
    var p50VsRedisOnly: Double?
    var p99VsRedisOnly: Double?
    /// Fleet suite's stampede rows: loader runs per cold key, summed over the nodes.
    var loadsPerKey: Double?

    /// Whether this is the row others are compared with: LMDBCache in its default configuration.
    var isReference: Bool { system == "LMDBCache" && variant == nil }

    /// The system's name with its variant, as the tables print it.
    var label: String { variant.map { "\(system) (\($0))" } ?? system }
}

/// Summarizes interleaved runs of one system on one workload: median throughput, latency
/// percentiles over every timed operation (or batch) of every run.
func summarize(
    suite: String, system: String, variant: String? = nil, workload: String, threads: Int, valueBytes: Int,
    runs: [RunSample]
) -> ResultRow {
    let batches = runs.flatMap(\.batchNanos)
    let batchSize = Double(runs.first?.batchSize ?? 1)
    let writerCPU = runs.compactMap { run in
        run.writerCPUNanoseconds.map { Double($0) / Double(max(run.operations, 1)) }
    }
    let accessUpdates = runs.compactMap { run in
        run.accessUpdates.map { Double($0) / Double(max(run.operations, 1)) }
    }
    let bytesWritten = runs.compactMap { run in
        run.bytesWritten.map { Double($0) / Double(max(run.operations, 1)) }
    }
    let concurrentWrites = runs.compactMap { run in
        run.concurrentWrites.map { Double($0) / (Double(max(run.elapsedNanos, 1)) / 1e9) }
    }
    var row = ResultRow(
        suite: suite, system: system, workload: workload, threads: threads, valueBytes: valueBytes,
        opsPerSecond: runs.map(\.operationsPerSecond).median,
        p50Nanoseconds: Double(batches.percentile(0.50)) / batchSize,
        p99Nanoseconds: Double(batches.percentile(0.99)) / batchSize,
        variant: variant, runsOpsPerSecond: runs.map(\.operationsPerSecond),
        misses: runs.reduce(0) { $0 + $1.misses })
    row.writerCPUNanosecondsPerOperation = writerCPU.isEmpty ? nil : writerCPU.median
    row.concurrentWritesPerSecond = concurrentWrites.isEmpty ? nil : concurrentWrites.median
    row.accessUpdatesPerOperation = accessUpdates.isEmpty ? nil : accessUpdates.median
    row.bytesWrittenPerOperation = bytesWritten.isEmpty ? nil : bytesWritten.median
    return row
}

// MARK: - Timing

/// Monotonic nanoseconds (CLOCK_MONOTONIC on Linux).
@inline(__always)
func nanosecondsNow() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// Keeps `value` alive as far as the optimizer can tell: a call it cannot see through.
@inline(never)
@_optimize(none)
func blackHole<T>(_ value: T) {}

/// Lets a value that is only read, or only written by one thread at a time with a
/// happens-before edge in between (thread start, semaphore), cross into a thread.
struct Unchecked<Value>: @unchecked Sendable {
    var value: Value
}

/// A one-shot spinning barrier: every thread records its start time only after all have arrived,
/// so the threads of a run overlap from the first operation.
final class SpinBarrier: Sendable {
    private let arrived = Atomic<Int>(0)
    private let parties: Int

    init(parties: Int) { self.parties = parties }

    func arriveAndWait() {
        arrived.add(1, ordering: .acquiringAndReleasing)
        while arrived.load(ordering: .acquiring) < parties {}
    }
}

/// What one thread of a run saw. Written only by that thread, read after it signalled.
final class ThreadRecord: @unchecked Sendable {
    var start: UInt64 = 0
    var end: UInt64 = 0
    var batchNanos: [UInt64] = []
    var misses = 0
    var checksum = 0
}

/// One timed run of one system: all its threads together.
struct RunSample {
    var operations: Int
    var elapsedNanos: UInt64
    /// Each batch's duration, over every thread.
    var batchNanos: [UInt64]
    var batchSize: Int
    /// Gets that found nothing (should be 0: every key is present).
    var misses: Int
    /// LMDBCache in the disk suite: its writer threads' CPU time over the run and the drain.
    var writerCPUNanoseconds: UInt64? = nil
    /// LMDBCache in the disk suite: access updates its disk tier committed over the run and the drain.
    var accessUpdates: Int64? = nil
    /// Read-while-writing: writes the other thread committed during the run.
    var concurrentWrites: Int? = nil
    /// Disk suite, stores on local files: bytes written to storage over the run and the drain.
    var bytesWritten: UInt64? = nil

    var operationsPerSecond: Double {
        Double(operations) / (Double(max(elapsedNanos, 1)) / 1e9)
    }
}

/// Runs `body(thread)` on `threads` new threads at once and returns when all have finished.
func onThreads(_ threads: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let done = DispatchSemaphore(value: 0)
    for index in 0..<threads {
        let thread = Thread {
            body(index)
            done.signal()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    for _ in 0..<threads { done.wait() }
}

// MARK: - Statistics

extension Array where Element == Double {
    /// The median (mean of the middle two for an even count); 0 when empty.
    var median: Double {
        guard !isEmpty else { return 0 }
        let sorted = self.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

extension Array where Element == UInt64 {
    /// Nearest-rank percentile (`fraction` in 0...1) of the values; 0 when empty.
    func percentile(_ fraction: Double) -> UInt64 {
        guard !isEmpty else { return 0 }
        let sorted = self.sorted()
        let rank = Int((fraction * Double(sorted.count)).rounded(.up))
        return sorted[Swift.min(Swift.max(rank, 1), sorted.count) - 1]
    }
}
