import Foundation
import LMDBCacheStorage
import Logging

/// A two-tier cache: a ``MemoryCache`` in front of a ``DiskCache``, with values encoded by a
/// ``ValueCodec``.
///
/// Lookups try memory, then disk; a disk hit is decoded once and promoted to memory. Inserts
/// go to both tiers: memory at once, disk through the write-behind queue (reads see queued writes,
/// so a value read right after its insert is that value). Removals clear both tiers.
///
/// ```swift
/// let cache = try Cache<String, Article>(
///     directory: URL(fileURLWithPath: "/var/cache/myservice/articles"),
///     configuration: .init(
///         memory: .init(countLimit: 10_000, costLimit: 64 << 20, ageLimit: .seconds(300)),
///         disk: .init(countLimit: nil, costLimit: 1 << 30, ageLimit: .seconds(30 * 86_400),
///                     freeSpaceLimit: 512 << 20)))
/// cache["a1"] = article
/// let fresh = try await cache.value(forKey: "a3") { try await api.article(id: "a3") }
/// ```
///
/// Inserts and lookups do not throw: a value the codec cannot encode, or the disk refuses, stays
/// in memory only (the value it replaced is removed from disk), a disk write that fails is logged
/// and counted, and ``flush()`` throws the first such failure. An insert or removal changes both
/// tiers as one step per key, so concurrent writers of a key leave the tiers agreeing.
/// Safe to use from any thread or task.
public final class Cache<Key: CacheKey, Value: Sendable>: Sendable {
    /// Called once for every entry that leaves a tier, with the tier, after the cache's locks are
    /// released: on the removing thread for the memory tier and for explicit removals, on a
    /// queue of the disk tier's for entries trimming evicts from disk.
    public typealias RemovalListener = @Sendable (CacheRemoval<Key, Value>) -> Void

    /// The configuration the cache was opened with.
    public let configuration: Configuration
    /// The memory tier. Writing to it directly bypasses the disk tier.
    public let memory: MemoryCache<Key, Value>
    /// The disk tier; nil for a memory-only cache. Writing to it directly bypasses the memory tier.
    public let disk: DiskCache?
    let codec: any ValueCodec<Value>
    let logger: Logger
    let listener: RemovalListener?
    let counters: CacheCounters
    let loads: LoadCoalescer<Key, Value>
    /// The first write failure since the last ``flush()``.
    let failure = Locked<(any Error)?>(nil)
    let evictionToken: UInt64?
    /// The disk store's dropped-write count when this cache opened (the store may outlive it).
    let droppedWritesAtOpen: Int
    let isClosed = LockedFlag()
    /// Make each insert and removal one step in both tiers, per key.
    let writeLocks: KeyWriteLocks
    /// Names this cache's changes in the directory's change log (``CacheChange/origin``):
    /// random, nonzero.
    let origin = UInt64.random(in: 1...UInt64.max)
    /// Follows the change log (``Configuration/coherence``); nil without a disk tier or with
    /// coherence off.
    let follower: ChangeFollower?
    /// The remote tier's store (``Configuration/remote``); nil without one.
    let remote: (any RemoteStore)?
    /// Applies the changes other machines publish through the remote tier to both local tiers.
    let remoteFollower: ChangeFollower?
    /// The remote follower, for the store to wake when changes arrive; emptied on close (the store
    /// holds the closure that reads it).
    let remoteWake = Locked<ChangeFollower?>(nil)

    /// Opens (creating when missing, owner-only) a two-tier cache whose disk tier lives in
    /// `directory`.
    ///
    /// - Parameters:
    ///   - directory: the disk tier's directory, created (mode 0700) when missing.
    ///   - configuration: both tiers' limits and the codec.
    ///   - logger: where the cache logs, at info level and below; nothing is logged by default.
    ///     Keys, paths and error messages appear in its metadata escaped (control characters,
    ///     bidi controls and line separators as `\n` or `\u{XXXX}`) and cut short (a key after
    ///     64 characters, other text after 1,024), as in ``CacheError/description``.
    ///   - removalListener: called with each entry that leaves a tier and why.
    /// - Throws: what ``DiskCache/init(directory:configuration:logger:)`` throws.
    public init(
        directory: URL, configuration: Configuration,
        logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) throws {
        self.configuration = configuration
        self.logger = logger
        codec = configuration.codec
        listener = removalListener
        let counters = CacheCounters(name: configuration.name ?? directory.lastPathComponent)
        self.counters = counters
        let reading = ClockReading(configuration.timeoutClock)
        let loads = LoadCoalescer<Key, Value>(now: { reading.elapsed })
        self.loads = loads
        let writeLocks = KeyWriteLocks()
        self.writeLocks = writeLocks
        memory = MemoryCache(
            configuration: configuration.memoryWithClock, removalListener: removalListener,
            metrics: counters.memoryMetrics, logger: logger)
        let disk = try DiskCache(
            directory: directory, configuration: configuration.diskWithClock, logger: logger, origin: origin)
        self.disk = disk
        droppedWritesAtOpen = disk.droppedWriteCount
        if let interval = configuration.coherence.pollInterval {
            let follower: ChangeFollower
            do {
                follower = ChangeFollower(
                    feed: try DiskChangeLog(disk: disk), origin: origin,
                    target: Self.followerTarget(memory, loads: loads, writeLocks: writeLocks),
                    cacheName: configuration.name ?? directory.lastPathComponent,
                    logger: logger)
            } catch {
                disk.close()
                throw error
            }
            follower.start(interval: interval)
            self.follower = follower
        } else {
            follower = nil
        }
        if let tier = configuration.remote {
            let name = configuration.name ?? directory.lastPathComponent
            let store: any RemoteStore
            do {
                let wake = remoteWake
                store = try tier.open(
                    RemoteContext(
                        origin: origin, cacheName: name, logger: logger,
                        changesArrived: { wake.withLock { $0 }?.wake() }))
            } catch {
                follower?.stop()
                disk.close()
                throw error
            }
            let remoteFollower = ChangeFollower(
                feed: store.feed, origin: origin,
                target: Self.remoteFollowerTarget(
                    memory, disk: disk, origin: origin, loads: loads, writeLocks: writeLocks, logger: logger,
                    dropsDisk: store.dropsDiskTierOnMissedChanges),
                cacheName: name, logger: logger)
            // The store wakes it when messages arrive; the timer is the backstop.
            remoteFollower.start(interval: configuration.coherence.pollInterval ?? .milliseconds(5))
            remoteWake.withLock { $0 = remoteFollower }
            remote = store
            self.remoteFollower = remoteFollower
        } else {
            remote = nil
            remoteFollower = nil
        }
        evictionToken = disk.observeEvictions { evictions in
            for eviction in evictions {
                counters.diskRemoval(eviction.reason)
                guard let removalListener, let key = Key(cacheKeyBytes: eviction.key) else { continue }
                removalListener(CacheRemoval(key: key, value: nil, reason: eviction.reason, tier: .disk))
            }
        }
    }

    /// A memory-only cache: the same API without a disk tier.
    public init(
        memory configuration: MemoryCache<Key, Value>.Configuration,
        logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) {
        self.configuration = Configuration(memory: configuration, codec: UnusedCodec())
        self.logger = logger
        codec = UnusedCodec()
        listener = removalListener
        counters = CacheCounters(name: "memory")
        let reading = ClockReading(self.configuration.timeoutClock)
        loads = LoadCoalescer<Key, Value>(now: { reading.elapsed })
        writeLocks = KeyWriteLocks()
        memory = MemoryCache(
            configuration: configuration, removalListener: removalListener, metrics: counters.memoryMetrics,
            logger: logger)
        disk = nil
        droppedWritesAtOpen = 0
        evictionToken = nil
        follower = nil
        remote = nil
        remoteFollower = nil
    }

    deinit {
        close()
    }

    // MARK: Trimming

    /// Trims each tier to at most `count` entries, least recently used first.
    public func trim(toCount count: Int) {
        memory.trim(toCount: count)
        disk.map { disk in perform("trim") { try disk.trim(toCount: count) } }
    }

    /// Trims each tier to at most `cost` (memory: its cost; disk: bytes), least recently used first.
    public func trim(toCost cost: Int) {
        memory.trim(toCost: cost)
        disk.map { disk in perform("trim") { try disk.trim(toCost: cost) } }
    }

    /// Removes entries not read or written for `age` or longer from each tier.
    public func trim(toAge age: Duration) {
        memory.trim(toAge: age)
        disk.map { disk in perform("trim") { try disk.trim(toAge: age) } }
    }

    /// Removes expired entries from each tier.
    public func removeExpired() {
        memory.removeExpired()
        disk.map { disk in perform("trim") { try disk.removeExpired() } }
    }

    // MARK: Statistics and lifecycle

    /// Hits and misses per tier, removals by reason, loads and failures since the cache opened.
    ///
    /// Reading it also brings the metrics' entry and cost gauges up to date.
    public var statistics: CacheStatistics {
        var statistics = counters.statistics(memory: memory.statistics)
        if let follower {
            statistics.invalidationsReceived = follower.received.load(ordering: .acquiring)
            statistics.invalidationsApplied = follower.applied.load(ordering: .relaxed)
            statistics.memoryTierDrops = follower.memoryDrops.load(ordering: .relaxed)
            statistics.invalidationLag = .milliseconds(Int64(clamping: follower.lastLag.load(ordering: .relaxed)))
        }
        if let remote, let remoteFollower {
            var remoteStatistics = remote.statistics
            remoteStatistics.changesReceived = remoteFollower.received.load(ordering: .acquiring)
            remoteStatistics.changesApplied = remoteFollower.applied.load(ordering: .relaxed)
            remoteStatistics.memoryTierDrops = remoteFollower.memoryDrops.load(ordering: .relaxed)
            statistics.remote = remoteStatistics
        }
        if let disk { statistics.failedWrites += disk.droppedWriteCount - droppedWritesAtOpen }
        if let disk, !isClosed.value {
            counters.diskMetrics.entries.set(disk.totalCount)
            counters.diskMetrics.cost.set(disk.totalCost)
        }
        return statistics
    }

    /// Commits every insert and removal so far to disk and syncs it.
    ///
    /// - Throws: the first write failure since the previous flush (a value the codec could not
    ///   encode, a write the disk refused), or ``CacheError/closed``.
    public func flush() throws {
        try disk?.flush()
        if isClosed.value { throw CacheError.closed }
        if let error = failure.withLock({ failure in
            defer { failure = nil }
            return failure
        }) {
            throw error
        }
    }

    /// Flushes, then closes the cache and empties its memory tier (the listener is not told:
    /// nothing was removed from the cache's data). Later calls do nothing and
    /// return nil, or throw ``CacheError/closed`` where they throw. Calling it again does nothing.
    public func close() {
        guard isClosed.set() else { return }
        follower?.stop()
        remoteFollower?.stop()
        remoteWake.withLock { $0 = nil }
        remote?.close()
        if let evictionToken, let disk {
            disk.waitForEvictionEvents()
            disk.stopObservingEvictions(evictionToken)
        }
        memory.stopTrimming()
        disk?.close()
        memory.discardAllAndClose()
    }

    var isClosedForLoading: Bool { isClosed.value }

    /// Runs `body` holding `key`'s write lock (`body` must not call user code).
    func withWriteLock<T>(for key: Key, _ body: () -> T) -> T {
        writeLocks.withLock(for: key, body)
    }

    func countLoad() {
        counters.load()
    }

    func countLoadFailure(_ error: any Error) {
        counters.loadFailure()
        logger.debug("LMDBCache loader failed", metadata: ["error": .escaped(error)])
    }

    func countRefresh(succeeded: Bool) {
        counters.refresh(succeeded: succeeded)
    }

    func countStaleServed(_ reason: StaleReason) {
        counters.staleServed(reason)
    }

    func countLoadTimeout() {
        counters.loadTimeout()
    }

    func countBulkLoad(keys: Int) {
        counters.bulkLoad(keys: keys)
    }

    /// Reads the change log now and applies what other caches changed (for tests: every change
    /// committed before the call is then applied). Does nothing with coherence off.
    package func followChanges() {
        follower?.pollNow()
    }

    /// Waits until the listener has heard of every disk eviction so far (for tests).
    func waitForEvictionEvents() {
        disk?.waitForEvictionEvents()
    }

    // MARK: Failures

    func perform(_ operation: String, _ body: () throws -> Void) {
        do { try body() } catch { record(error, operation) }
    }

    /// Keeps the first failure for ``flush()``, counts it and logs it.
    func record(_ error: any Error, _ operation: String) {
        counters.failedWrite()
        failure.withLock { failure in
            if failure == nil { failure = error }
        }
        logger.info("LMDBCache \(operation) failed", metadata: ["error": .escaped(error)])
    }
}

/// The codec of a memory-only cache, which never encodes.
private struct UnusedCodec<Value>: ValueCodec {
    func encode(_ value: Value) throws -> [UInt8] {
        throw CacheError.codecFailed(operation: "encode", reason: "a memory-only cache has no codec")
    }

    func decode(_ bytes: [UInt8]) throws -> Value {
        throw CacheError.codecFailed(operation: "decode", reason: "a memory-only cache has no codec")
    }
}
