import Metrics
import Synchronization

/// Counts of a two-tier ``Cache`` since it was opened.
public struct CacheStatistics: Sendable, Equatable {
    /// The memory tier: every lookup counts a hit or a miss here first.
    public var memory: TierStatistics
    /// The disk tier: lookups the memory tier missed; removals are the entries trimming evicted
    /// in this process.
    public var disk: TierStatistics
    /// Times a loader ran (coalesced callers count once).
    public var loads: Int
    /// Times a loader threw.
    public var loadFailures: Int
    /// Values the codec could not encode or decode, writes the disk tier refused, and queued
    /// writes it dropped because they could not be committed (a full disk; ``Cache/flush()``
    /// throws the error).
    public var failedWrites: Int
}

/// The two-tier cache's own counts and metrics (the memory tier keeps its own in its shards).
final class CacheCounters: Sendable {
    private let diskHits = Atomic<Int>(0)
    private let diskMisses = Atomic<Int>(0)
    private let loads = Atomic<Int>(0)
    private let loadFailures = Atomic<Int>(0)
    private let failedWrites = Atomic<Int>(0)
    /// Indexed by ``RemovalReason/index``; evictions are rare enough for a lock.
    private let diskRemovals = Locked([Int](repeating: 0, count: RemovalReason.allCases.count))

    let memoryMetrics: TierMetrics
    let diskMetrics: TierMetrics
    private let loadsCounter: Counter
    private let loadFailuresCounter: Counter
    private let failedWritesCounter: Counter

    init(name: String) {
        memoryMetrics = TierMetrics(cache: name, tier: .memory)
        diskMetrics = TierMetrics(cache: name, tier: .disk)
        loadsCounter = Counter(label: "lmdbcache_loads_total", dimensions: [("cache", name)])
        loadFailuresCounter = Counter(label: "lmdbcache_load_failures_total", dimensions: [("cache", name)])
        failedWritesCounter = Counter(label: "lmdbcache_failed_writes_total", dimensions: [("cache", name)])
    }

    func diskHit() {
        diskHits.add(1, ordering: .relaxed)
        diskMetrics.hits.increment()
    }

    func diskMiss() {
        diskMisses.add(1, ordering: .relaxed)
        diskMetrics.misses.increment()
    }

    func load() {
        loads.add(1, ordering: .relaxed)
        loadsCounter.increment()
    }

    func loadFailure() {
        loadFailures.add(1, ordering: .relaxed)
        loadFailuresCounter.increment()
    }

    func failedWrite() {
        failedWrites.add(1, ordering: .relaxed)
        failedWritesCounter.increment()
    }

    func diskRemoval(_ reason: RemovalReason) {
        diskRemovals.withLock { $0[reason.index] += 1 }
        diskMetrics.removals[reason.index].increment()
    }

    func statistics(memory: TierStatistics) -> CacheStatistics {
        var disk = TierStatistics()
        disk.hits = diskHits.load(ordering: .relaxed)
        disk.misses = diskMisses.load(ordering: .relaxed)
        let removals = diskRemovals.withLock { $0 }
        for reason in RemovalReason.allCases where removals[reason.index] > 0 {
            disk.removals[reason] = removals[reason.index]
        }
        return CacheStatistics(
            memory: memory, disk: disk, loads: loads.load(ordering: .relaxed),
            loadFailures: loadFailures.load(ordering: .relaxed), failedWrites: failedWrites.load(ordering: .relaxed))
    }
}
