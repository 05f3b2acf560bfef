import LMDBCacheStorage
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
    /// Background reloads (``Freshness/refreshAfter``) that stored a new value.
    public var refreshes = 0
    /// Background reloads whose loader threw: the old value was kept.
    public var refreshFailures = 0
    /// Stale values served because the loader threw (``Freshness/staleIfError``).
    public var staleServedOnError = 0
    /// Stale values served because the loader was slower than ``Freshness/timeout`` or
    /// ``Freshness/hardTimeout``.
    public var staleServedOnTimeout = 0
    /// Waits that ended with ``CacheError/loadTimedOut(key:after:)``.
    public var loadTimeouts = 0
    /// Calls of a bulk loader (``Cache/values(forKeys:expiresAfter:freshness:tags:load:)``).
    public var bulkLoads = 0
    /// Keys asked of bulk loaders, over all their calls.
    public var bulkLoadKeys = 0
    /// Changes made by other caches sharing the directory (other processes, other instances)
    /// that this cache read from the change log and applied (``Cache/Coherence``).
    public var invalidationsReceived = 0
    /// Memory entries those changes dropped (a change to a key this memory tier did not hold
    /// drops none).
    public var invalidationsApplied = 0
    /// Times the memory tier was dropped whole because it missed changes (it fell further behind
    /// the change log than the log keeps, or the store was emptied or replaced under it).
    public var memoryTierDrops = 0
    /// How long after its commit the newest change received was applied here (wall clocks);
    /// zero before the first.
    public var invalidationLag: Duration = .zero
    /// The remote tier's counts (``Cache/Configuration/remote``); nil without one.
    public var remote: RemoteStatistics?
}

/// Why a get-or-load served a stale value: the `reason` dimension of
/// `lmdbcache_stale_served_total`.
enum StaleReason: String {
    case error, timeout
}

/// The two-tier cache's own counts and metrics (the memory tier keeps its own in its shards).
final class CacheCounters: Sendable {
    private let diskHits = Atomic<Int>(0)
    private let diskMisses = Atomic<Int>(0)
    private let loads = Atomic<Int>(0)
    private let loadFailures = Atomic<Int>(0)
    private let failedWrites = Atomic<Int>(0)
    private let refreshes = Atomic<Int>(0)
    private let refreshFailures = Atomic<Int>(0)
    private let staleOnError = Atomic<Int>(0)
    private let staleOnTimeout = Atomic<Int>(0)
    private let loadTimeouts = Atomic<Int>(0)
    private let bulkLoads = Atomic<Int>(0)
    private let bulkLoadKeys = Atomic<Int>(0)
    /// Indexed by ``RemovalReason/index``; evictions are rare enough for a lock.
    private let diskRemovals = Locked([Int](repeating: 0, count: RemovalReason.allCases.count))

    let memoryMetrics: TierMetrics
    let diskMetrics: TierMetrics
    private let loadsCounter: Counter
    private let loadFailuresCounter: Counter
    private let failedWritesCounter: Counter
    private let refreshesCounter: Counter
    private let refreshFailuresCounter: Counter
    private let staleOnErrorCounter: Counter
    private let staleOnTimeoutCounter: Counter
    private let loadTimeoutsCounter: Counter
    private let bulkLoadsCounter: Counter
    private let bulkLoadKeysCounter: Counter

    init(name: String) {
        memoryMetrics = TierMetrics(cache: name, tier: .memory)
        diskMetrics = TierMetrics(cache: name, tier: .disk)
        loadsCounter = Counter(label: "lmdbcache_loads_total", dimensions: [("cache", name)])
        loadFailuresCounter = Counter(label: "lmdbcache_load_failures_total", dimensions: [("cache", name)])
        failedWritesCounter = Counter(label: "lmdbcache_failed_writes_total", dimensions: [("cache", name)])
        refreshesCounter = Counter(
            label: "lmdbcache_refreshes_total", dimensions: [("cache", name), ("result", "succeeded")])
        refreshFailuresCounter = Counter(
            label: "lmdbcache_refreshes_total", dimensions: [("cache", name), ("result", "failed")])
        staleOnErrorCounter = Counter(
            label: "lmdbcache_stale_served_total",
            dimensions: [("cache", name), ("reason", StaleReason.error.rawValue)])
        staleOnTimeoutCounter = Counter(
            label: "lmdbcache_stale_served_total",
            dimensions: [("cache", name), ("reason", StaleReason.timeout.rawValue)])
        loadTimeoutsCounter = Counter(label: "lmdbcache_load_timeouts_total", dimensions: [("cache", name)])
        bulkLoadsCounter = Counter(label: "lmdbcache_bulk_loads_total", dimensions: [("cache", name)])
        bulkLoadKeysCounter = Counter(label: "lmdbcache_bulk_load_keys_total", dimensions: [("cache", name)])
    }

    func refresh(succeeded: Bool) {
        if succeeded {
            refreshes.add(1, ordering: .relaxed)
            refreshesCounter.increment()
        } else {
            refreshFailures.add(1, ordering: .relaxed)
            refreshFailuresCounter.increment()
        }
    }

    func staleServed(_ reason: StaleReason) {
        switch reason {
        case .error:
            staleOnError.add(1, ordering: .relaxed)
            staleOnErrorCounter.increment()
        case .timeout:
            staleOnTimeout.add(1, ordering: .relaxed)
            staleOnTimeoutCounter.increment()
        }
    }

    func loadTimeout() {
        loadTimeouts.add(1, ordering: .relaxed)
        loadTimeoutsCounter.increment()
    }

    func bulkLoad(keys: Int) {
        bulkLoads.add(1, ordering: .relaxed)
        bulkLoadKeys.add(keys, ordering: .relaxed)
        bulkLoadsCounter.increment()
        bulkLoadKeysCounter.increment(by: Int64(keys))
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
        var statistics = CacheStatistics(
            memory: memory, disk: disk, loads: loads.load(ordering: .relaxed),
            loadFailures: loadFailures.load(ordering: .relaxed), failedWrites: failedWrites.load(ordering: .relaxed))
        statistics.refreshes = refreshes.load(ordering: .relaxed)
        statistics.refreshFailures = refreshFailures.load(ordering: .relaxed)
        statistics.staleServedOnError = staleOnError.load(ordering: .relaxed)
        statistics.staleServedOnTimeout = staleOnTimeout.load(ordering: .relaxed)
        statistics.loadTimeouts = loadTimeouts.load(ordering: .relaxed)
        statistics.bulkLoads = bulkLoads.load(ordering: .relaxed)
        statistics.bulkLoadKeys = bulkLoadKeys.load(ordering: .relaxed)
        return statistics
    }
}
