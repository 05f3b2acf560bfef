import Dispatch
import Foundation
import Synchronization

/// A family of measurements run together: `memory` now; `disk`, `tiered` and `hitrate` later,
/// each with its own protocol for the systems it compares (``MemorySystem`` for memory).
protocol Suite {
    /// The name `--suite` selects it by.
    var name: String { get }
    /// Runs every measurement of the suite, printing progress through `log`.
    func run(options: Options, log: (String) -> Void) -> SuiteReport
}

/// Settings from the command line that every suite reads.
struct Options: Sendable {
    /// Small data sets and few repeats: a whole run well under a minute.
    var quick = false
    /// Where to write the results as JSON, if anywhere.
    var jsonPath: String?
    /// Interleaved repeats of each measurement; the report gives their median.
    var repeats: Int { quick ? 3 : 5 }
    /// Operations timed together for the latency estimate.
    let batchSize = 1_000
}

/// What one suite measured, ready for the text table and the JSON file.
struct SuiteReport: Codable, Sendable {
    var suite: String
    /// Workload facts for the header: entry count, operations per run, value size, ...
    var parameters: [String: String]
    /// Free-form lines printed under the table (how latency was estimated, ...).
    var notes: [String]
    var rows: [ResultRow]
}

/// One system's result in one cell (operation, distribution, threads) of a suite.
struct ResultRow: Codable, Sendable {
    var operation: String
    var distribution: String
    var threads: Int
    var system: String
    /// Median over the repeats of the aggregate throughput, in million operations per second.
    var medianMops: Double
    /// Every repeat's aggregate throughput, in run order.
    var runsMops: [Double]
    /// Median and 99th percentile of the per-operation time, estimated per batch (batch time /
    /// batch size) over all threads and repeats, in nanoseconds.
    var p50Nanos: Double
    var p99Nanos: Double
    /// This system's median throughput over the reference system's (LMDBCache) in the same cell.
    var ratioToReference: Double?
    /// Gets that found no value, over all repeats (each get is of a key that was inserted).
    var misses: Int
    /// Operations over all repeats.
    var operations: Int
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
