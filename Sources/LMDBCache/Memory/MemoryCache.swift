import LMDBCacheStorage
import Logging
import Metrics
import Synchronization

/// An in-memory cache with count, cost, age and per-entry expiry limits, which admits entries
/// by frequency (``Policy/adaptive``, the default) or keeps the least recently used
/// (``Policy/lru``).
///
/// Entries are spread over a power-of-two number of shards by their key's hash, each behind its
/// own lock with its own hash index and lists, so threads working on different keys rarely wait
/// for each other. Each shard holds an equal share of the limits and chooses its own evictions
/// by the policy; every limit holds after every insert. Removed values are released, and the
/// removal listener called, after the shard's lock is dropped.
///
/// ```swift
/// let hot = MemoryCache<Int, [UInt8]>(configuration: .init(countLimit: 1_000))
/// hot.insert([1, 2, 3], forKey: 7, cost: 3)
/// let bytes = hot[7]
/// ```
///
/// Safe to use from any thread or task.
public final class MemoryCache<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Called once for every entry that leaves the cache, on the thread that removed it, after
    /// the cache's locks are released (it may call back into the cache).
    public typealias RemovalListener = @Sendable (CacheRemoval<Key, Value>) -> Void

    /// The configuration the cache was created with.
    public let configuration: Configuration
    @usableFromInline let shards: ShardArray<Key, Value>
    /// Shifts a hash's top bits down to a shard index.
    @usableFromInline let shardShift: Int
    @usableFromInline let clock: CacheClock
    @usableFromInline let weigher: (@Sendable (Value) -> Int)?
    @usableFromInline let listener: RemovalListener?
    @usableFromInline let metrics: TierMetrics?
    let scheduler = Locked<TrimScheduler?>(nil)
    /// Set by ``discardAllAndClose()``; read under a shard's lock by every insert, so no insert
    /// lands in a shard after the close has emptied it.
    @usableFromInline let isClosed = Atomic<Bool>(false)

    /// An empty cache.
    ///
    /// - Parameters:
    ///   - configuration: the limits; the default has none.
    ///   - removalListener: called with each entry that leaves the cache and why.
    public convenience init(configuration: Configuration = .init(), removalListener: RemovalListener? = nil) {
        self.init(configuration: configuration, removalListener: removalListener, metrics: nil, logger: nil)
    }

    init(configuration: Configuration, removalListener: RemovalListener?, metrics: TierMetrics?, logger: Logger?) {
        self.configuration = configuration
        let count = configuration.shardCount
        var random = SystemRandomNumberGenerator()
        let climber = WindowClimber(
            countLimit: configuration.countLimit, costBounded: configuration.costLimit != nil, shards: count)
        shards = ShardArray(
            (0..<count).map { index in
                MemoryShard(
                    limits: .init(
                        count: Configuration.share(of: configuration.countLimit, shard: index, of: count),
                        cost: Configuration.share(of: configuration.costLimit, shard: index, of: count),
                        age: configuration.ageLimit?.milliseconds),
                    adaptive: configuration.policy == .adaptive, seed: random.next(), climber: climber)
            })
        shardShift = Int.bitWidth - count.trailingZeroBitCount
        clock = configuration.clock
        weigher = configuration.weigher
        listener = removalListener
        self.metrics = metrics
        if configuration.automaticTrimming {
            let scheduler = TrimScheduler(
                tier: .memory, interval: configuration.autoTrimInterval,
                logger: logger ?? .lmdbCacheDefault
            ) { [weak self] in self?.trimPass() ?? 0 }
            self.scheduler.withLock { $0 = scheduler }
        }
    }

    deinit {
        stopTrimming()
        shards.deallocate()
    }

    /// Stops the trimming scheduler, waiting for a pass under way; nothing when there is none.
    func stopTrimming() {
        scheduler.withLock { $0 }?.stop()
    }

    /// The running trimming scheduler, if any (tests wait on its passes).
    var trimScheduler: TrimScheduler? {
        scheduler.withLock { $0 }
    }

    // MARK: Trimming

    /// Removes expired entries, then least recently used ones until at most `count` remain.
    ///
    /// Each shard keeps at most its share of `count`.
    /// - Complexity: O(n) for the expiry scan, plus O(1) per removal.
    public func trim(toCount count: Int) {
        let shardCount = shards.count
        forEachShard(now: clock.milliseconds) { shard, index, now, removed in
            shard.trim(
                count: Configuration.share(of: count, shard: index, of: shardCount), cost: nil, accessedBefore: nil,
                now: now, removed: &removed)
        }
    }

    /// Removes expired entries, then least recently used ones until the total cost is at most
    /// `cost`. Each shard keeps at most its share of `cost`.
    /// - Complexity: O(n) for the expiry scan, plus O(1) per removal.
    public func trim(toCost cost: Int) {
        let shardCount = shards.count
        forEachShard(now: clock.milliseconds) { shard, index, now, removed in
            shard.trim(
                count: nil, cost: Configuration.share(of: cost, shard: index, of: shardCount), accessedBefore: nil,
                now: now, removed: &removed)
        }
    }

    /// Removes expired entries and those not read or written for `age` or longer.
    /// - Complexity: O(n) for the expiry scan, plus O(1) per removal.
    public func trim(toAge age: Duration) {
        let now = clock.milliseconds
        let cutoff = now.cutoff(forAge: age)
        forEachShard(now: now) { shard, _, now, removed in
            shard.trim(count: nil, cost: nil, accessedBefore: cutoff, now: now, removed: &removed)
        }
    }

    /// Removes every entry whose expiry has passed.
    /// - Complexity: O(n).
    public func removeExpired() {
        forEachShard(now: clock.milliseconds) { shard, _, now, removed in
            shard.removeExpired(now: now, removed: &removed)
        }
    }

    /// Node slots one batch of a trim pass scans for expired entries while holding a shard's lock.
    static var expiryScanBatch: Int { 1_024 }
    /// Idle entries one batch of a trim pass removes while holding a shard's lock.
    static var idleRemovalBatch: Int { 256 }

    /// One pass of the trimming scheduler: removes expired entries, then entries idle past the age
    /// limit (count and cost need no pass: they hold after every insert). Works in batches, taking
    /// one shard's lock for at most ``expiryScanBatch`` slots or ``idleRemovalBatch`` removals, so
    /// an operation on the same shard waits for one batch at most. Returns the entries removed.
    @discardableResult
    func trimPass() -> Int {
        let now = clock.milliseconds
        let cutoff = configuration.ageLimit.map { now.cutoff(forAge: $0) }
        var total = 0
        for index in 0..<shards.count {
            var start = 0
            while true {
                var removed = RemovedEntries<Key, Value>()
                let (slots, report) = shards.withLock(at: index) { shard in
                    shard.removeExpired(
                        inSlots: start..<(start + Self.expiryScanBatch), now: now, idleBefore: cutoff,
                        removed: &removed)
                    return (shard.nodeSlots, metrics == nil ? nil : shard.takeReport(force: false))
                }
                total += removed.count
                finish(removed, report)
                start += Self.expiryScanBatch
                if start >= slots { break }
            }
            guard let cutoff else { continue }
            var done = false
            while !done {
                var removed = RemovedEntries<Key, Value>()
                done = shards.withLock(at: index) { shard in
                    shard.removeIdle(accessedBefore: cutoff, limit: Self.idleRemovalBatch, removed: &removed)
                }
                total += removed.count
                finish(removed, nil)
            }
        }
        return total
    }

    // MARK: Internals

    @inlinable @inline(__always)
    func shardIndex(_ hash: Int) -> Int {
        Int(truncatingIfNeeded: UInt(bitPattern: hash) >> UInt(shardShift))
    }

    func forEachShard(_ body: (inout MemoryShard<Key, Value>, inout RemovedEntries<Key, Value>) -> Void) {
        forEachShard(now: 0) { shard, _, _, removed in body(&shard, &removed) }
    }

    /// Runs `body` on each shard in turn, one lock at a time, finishing each shard's removals
    /// after its lock is dropped.
    func forEachShard(
        now: UInt64, _ body: (inout MemoryShard<Key, Value>, Int, UInt64, inout RemovedEntries<Key, Value>) -> Void
    ) {
        for index in 0..<shards.count {
            var removed = RemovedEntries<Key, Value>()
            let report = shards.withLock(at: index) { shard in
                body(&shard, index, now, &removed)
                return metrics == nil ? nil : shard.takeReport(force: true)
            }
            finish(removed, report)
        }
    }

    /// Outside any lock: tells the listener and metrics of removals. The caller releases the
    /// removed values when its `removed` goes, after this, also outside the lock.
    @inlinable @inline(__always)
    func finish(_ removed: borrowing RemovedEntries<Key, Value>, _ report: ShardReport?) {
        // Nobody to tell: the entries are released when the caller's copy goes, after the lock.
        guard listener != nil || metrics != nil else { return }
        if !removed.isEmpty || report != nil { deliver(removed, report) }
    }

    @inlinable
    func deliver(_ removed: borrowing RemovedEntries<Key, Value>, _ report: ShardReport?) {
        removed.forEach { key, value, reason in
            metrics?.count(reason)
            listener?(CacheRemoval(key: key, value: value, reason: reason, tier: .memory))
        }
        if let report { metrics?.record(report) }
    }

    /// `now` plus `duration` in milliseconds, saturating; a negative `duration` gives `now`, which
    /// has already expired.
    @inlinable
    static func deadline(_ now: UInt64, _ duration: Duration) -> UInt64 {
        now.addingSaturating(duration.milliseconds)
    }
}
