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
    private let scheduler = Locked<TrimScheduler?>(nil)
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

    // MARK: Values

    /// The live value for `key`, which becomes the most recently used entry of its list (and
    /// counts as an access for ``Policy/adaptive``); nil when there is none or it expired or sat
    /// idle past the age limit.
    ///
    /// - Complexity: O(1) expected. A hit allocates nothing.
    @inlinable
    public func value(forKey key: Key) -> Value? {
        lookUp(key).value
    }

    /// Stores `value` under `key` as the most recently used entry, replacing any value there, then
    /// evicts until every limit holds: least recently used entries under ``Policy/lru``; under
    /// ``Policy/adaptive`` the loser of the admission contest (the value stored here stays at
    /// least until the next insert into its shard, so a read right after this call finds it).
    ///
    /// - Parameters:
    ///   - value: the value to store.
    ///   - key: the key to store it under.
    ///   - cost: counted against ``Configuration/costLimit``; nil uses the configured weigher, else 0.
    ///   - expiresAfter: the entry is never returned after this long, read or not (PINCache's TTL).
    ///     Zero or negative: already expired, so never returned (it still replaces any value
    ///     there). Any length works; one reaching past `UInt64.max` milliseconds never expires.
    /// - Complexity: O(1) expected, plus O(1) per entry evicted.
    @inlinable
    public func insert(_ value: Value, forKey key: Key, cost: Int? = nil, expiresAfter: Duration? = nil) {
        let now = clock.milliseconds
        insert(value, forKey: key, cost: cost, expires: expiresAfter.map { Self.deadline(now, $0) } ?? 0, now: now)
    }

    /// ``insert(_:forKey:cost:expiresAfter:)`` of an entry carrying `tags`, for a later
    /// ``removeAll(taggedWith:)``. Replacing an entry replaces its tags.
    ///
    /// Tags are compared by their Normalization Form C: "caf\u{E9}" and "cafe\u{301}" are one tag.
    ///
    /// - Throws: ``CacheError/invalidTag(reason:)`` for an empty tag, one longer than 255 UTF-8
    ///   bytes, or more than 32 distinct tags; nothing is stored then (any value already there
    ///   stays).
    /// - Complexity: O(1) expected plus O(t) for the t tags, plus O(1) per entry evicted.
    public func insert(
        _ value: Value, forKey key: Key, cost: Int? = nil, expiresAfter: Duration? = nil, tags: Set<String>
    ) throws(CacheError) {
        let tags = try EntryTags(tags)
        let now = clock.milliseconds
        insert(
            value, forKey: key, cost: cost, expires: expiresAfter.map { Self.deadline(now, $0) } ?? 0, now: now,
            tags: tags)
    }

    /// Inserts with an absolute expiry (milliseconds since 1970, 0 for none); with `ifGeneration`
    /// (a promotion from disk), only when the key's shard has seen no insert or removal since
    /// ``lookUp(_:)`` returned it, nor a refused promotion of the key (MemoryShard+Promotions.swift).
    /// `servedUntil` and `stored` are the shard's (``MemoryShard/Node``); `tags` replace any the
    /// entry had (``EntryTags/none``: the new entry is untagged).
    @inlinable
    func insert(
        _ value: Value, forKey key: Key, cost: Int?, expires: UInt64, servedUntil: UInt64 = 0, stored: UInt64? = nil,
        now: UInt64, ifGeneration: UInt64? = nil, tags: EntryTags = .none
    ) {
        var removed = RemovedEntries<Key, Value>()
        let report = insert(
            value, forKey: key, cost: cost, expires: expires, servedUntil: servedUntil, stored: stored, now: now,
            ifGeneration: ifGeneration, removed: &removed, tags: tags)
        finish(removed, report)
    }

    /// ``insert(_:forKey:cost:expires:now:ifGeneration:)`` that leaves the listener untold: the
    /// caller passes the result to ``finish(_:_:)`` once it holds no lock of its own (the two-tier
    /// cache inserts under a per-key lock, and a listener may call back into it).
    @inlinable
    func insertDeferringRemovals(
        _ value: Value, forKey key: Key, cost: Int?, expires: UInt64, servedUntil: UInt64 = 0, now: UInt64,
        ifGeneration: UInt64? = nil, tags: EntryTags = .none
    ) -> (RemovedEntries<Key, Value>, ShardReport?) {
        var removed = RemovedEntries<Key, Value>()
        let report = insert(
            value, forKey: key, cost: cost, expires: expires, servedUntil: servedUntil, stored: nil, now: now,
            ifGeneration: ifGeneration, removed: &removed, tags: tags)
        return (removed, report)
    }

    /// The insert under the shard's lock: what it removed goes into `removed` (filled in place,
    /// never copied: each copy of an entry retains its key and value).
    @inlinable
    func insert(
        _ value: Value, forKey key: Key, cost: Int?, expires: UInt64, servedUntil: UInt64 = 0, stored: UInt64? = nil,
        now: UInt64, ifGeneration: UInt64?, removed: inout RemovedEntries<Key, Value>, tags: EntryTags = .none
    ) -> ShardReport? {
        let hash = key.hashValue
        let cost = max(0, cost ?? weigher?(value) ?? 0)
        return shards.withLock(at: shardIndex(hash)) { shard -> ShardReport? in
            let tag = SlotTable.tag(hash)
            if let ifGeneration,
                shard.generation != ifGeneration
                    || (!shard.refusals.isEmpty && shard.wasRefused(tag: tag, since: ifGeneration))
            {
                // Not promoted, but a disk hit is an access all the same.
                shard.recordAccess(tag: tag)
                shard.refusePromotion(key, tag: tag, removed: &removed)
                return nil
            }
            // Relaxed is enough: the shard lock orders this read after the close's emptying.
            if isClosed.load(ordering: .relaxed) { return nil }
            shard.insert(
                value, forKey: key, tag: tag, cost: cost, expires: expires, servedUntil: servedUntil,
                stored: stored, now: now, removed: &removed, tags: tags, promoted: ifGeneration != nil)
            return metrics == nil ? nil : shard.takeReport(force: false)
        }
    }

    /// ``value(forKey:)``, also returning the generation of the key's shard for a later
    /// conditional ``insert(_:forKey:cost:expires:now:ifGeneration:)``.
    @inlinable
    func lookUp(_ key: Key, counting: Bool = true) -> (value: Value?, generation: UInt64) {
        let hash = key.hashValue
        let now = clock.milliseconds
        var removed = RemovedEntries<Key, Value>()
        let (value, generation, report) = shards.withLock(at: shardIndex(hash)) { shard in
            let value = shard.value(
                forKey: key, tag: SlotTable.tag(hash), now: now, removed: &removed, counting: counting)
            return (value, shard.generation, metrics == nil ? nil : shard.takeReport(force: false))
        }
        finish(removed, report)
        return (value, generation)
    }

    /// ``lookUp(_:counting:)`` that also returns when the value was stored, and an entry kept
    /// past the time it is served until (`isStale`, counted as a miss), for a load that may
    /// serve it.
    func lookUpEntry(_ key: Key, counting: Bool = true) -> (entry: StoredValue<Value>?, generation: UInt64) {
        let hash = key.hashValue
        let now = clock.milliseconds
        var removed = RemovedEntries<Key, Value>()
        let (entry, generation, report) = shards.withLock(at: shardIndex(hash)) { shard in
            let entry = shard.entry(
                forKey: key, tag: SlotTable.tag(hash), now: now, removed: &removed, counting: counting, stale: true)
            return (entry, shard.generation, metrics == nil ? nil : shard.takeReport(force: false))
        }
        finish(removed, report)
        return (entry, generation)
    }

    /// When the live entry for `key` was stored and when it expires (milliseconds since 1970; 0:
    /// never); nil when there is none. Not an access, not counted.
    func metadata(forKey key: Key) -> (stored: UInt64, expires: UInt64)? {
        let hash = key.hashValue
        let now = clock.milliseconds
        return shards.withLock(at: shardIndex(hash)) { $0.metadata(forKey: key, tag: SlotTable.tag(hash), now: now) }
    }

    /// The tags of the live entry for `key` (``EntryTags/none`` when it has none); nil when there
    /// is none. Not an access, not counted.
    func tags(forKey key: Key) -> EntryTags? {
        let hash = key.hashValue
        let now = clock.milliseconds
        return shards.withLock(at: shardIndex(hash)) {
            $0.entryTags(forKey: key, tag: SlotTable.tag(hash), now: now)
        }
    }

    /// The current time by the cache's clock, in milliseconds since 1970.
    @inlinable
    var now: UInt64 { clock.milliseconds }

    /// The live value for `key` on get; on set, inserts with the default cost and no expiry, or
    /// removes the entry when set to nil.
    @inlinable
    public subscript(key: Key) -> Value? {
        get { value(forKey: key) }
        set {
            if let newValue { insert(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Removes the entry for `key`; returns its value if it was live (not expired, idle past the
    /// age limit, or kept only to be served stale).
    @discardableResult
    @inlinable
    public func removeValue(forKey key: Key) -> Value? {
        let (value, removed, report) = removeValueDeferringRemovals(forKey: key)
        finish(removed, report)
        return value
    }

    /// ``removeValue(forKey:)`` that leaves the listener untold, as
    /// ``insertDeferringRemovals(_:forKey:cost:expires:now:ifGeneration:)``.
    @inlinable
    func removeValueDeferringRemovals(forKey key: Key) -> (Value?, RemovedEntries<Key, Value>, ShardReport?) {
        let hash = key.hashValue
        let now = clock.milliseconds
        var removed = RemovedEntries<Key, Value>()
        let (value, report) = shards.withLock(at: shardIndex(hash)) { shard in
            let value = shard.removeValue(forKey: key, tag: SlotTable.tag(hash), now: now, removed: &removed)
            return (value, metrics == nil ? nil : shard.takeReport(force: false))
        }
        return (value, removed, report)
    }

    /// True when a live entry is stored for `key`. Not an access: LRU order is unchanged.
    @inlinable
    public func contains(_ key: Key) -> Bool {
        let hash = key.hashValue
        let now = clock.milliseconds
        return shards.withLock(at: shardIndex(hash)) { $0.contains(key, tag: SlotTable.tag(hash), now: now) }
    }

    /// Removes every entry carrying `tag` (expired ones included), telling the listener of each
    /// with ``RemovalReason/explicit``; returns how many were removed.
    ///
    /// Tags are compared by their Normalization Form C, as ``insert(_:forKey:cost:expiresAfter:tags:)``
    /// stores them. An invalid tag (empty, or longer than 255 UTF-8 bytes) matches nothing.
    ///
    /// Takes each shard's lock once, one at a time, and moves every shard's generation, even a
    /// shard holding no entry with the tag: the two-tier cache promotes a value read from disk
    /// only if its shard's generation has not moved since the memory miss, so a removal by tag
    /// racing a promotion wins (the promotion is refused rather than bringing back a removed
    /// entry).
    /// - Complexity: O(k) for the k entries removed, plus O(s) for the s shards.
    @discardableResult
    public func removeAll(taggedWith tag: String) -> Int {
        let (count, removed, report) = removeAllDeferringRemovals(taggedWith: tag)
        finish(removed, report)
        return count
    }

    /// ``removeAll(taggedWith:)`` that leaves the listener untold, as
    /// ``removeValueDeferringRemovals(forKey:)``: returns the number removed, the entries for
    /// ``finish(_:_:)`` and the shards' summed report.
    func removeAllDeferringRemovals(taggedWith tag: String) -> (Int, RemovedEntries<Key, Value>, ShardReport?) {
        // An invalid tag can be on no entry: nothing to remove, nothing to bump.
        guard let bytes = try? EntryTags.storedBytes(of: tag) else { return (0, RemovedEntries(), nil) }
        return removeAllDeferringRemovals(taggedWithStoredBytes: bytes)
    }

    /// ``removeAllDeferringRemovals(taggedWith:)`` of a tag given by its stored bytes
    /// (``EntryTags/storedBytes(of:)``, e.g. read from the disk tier's change log). Moves every
    /// shard's generation, as ``removeAll(taggedWith:)``.
    func removeAllDeferringRemovals(taggedWithStoredBytes bytes: [UInt8])
        -> (Int, RemovedEntries<Key, Value>, ShardReport?)
    {
        var removed = RemovedEntries<Key, Value>()
        var count = 0
        var total: ShardReport?
        for index in 0..<shards.count {
            let report = shards.withLock(at: index) { shard in
                count += shard.removeAll(taggedWith: bytes, removed: &removed)
                return metrics == nil ? nil : shard.takeReport(force: true)
            }
            if let report { total = total.map { Self.sum($0, report) } ?? report }
        }
        return (count, removed, total)
    }

    /// Two shards' reports as one, each field saturating at ±`Int.max` (as a report's cost is).
    static func sum(_ a: ShardReport, _ b: ShardReport) -> ShardReport {
        func add(_ x: Int, _ y: Int) -> Int {
            Int(clamping: min(max(Int128(x) + Int128(y), -Int128(Int.max)), Int128(Int.max)))
        }
        return ShardReport(
            hits: add(a.hits, b.hits), misses: add(a.misses, b.misses), count: add(a.count, b.count),
            cost: add(a.cost, b.cost))
    }

    /// Removes every entry.
    public func removeAll() {
        forEachShard { shard, removed in shard.removeAll(removed: &removed) }
    }

    /// ``removeAll()`` that leaves the listener untold, as
    /// ``removeValueDeferringRemovals(forKey:)``: the entries for ``finish(_:_:)`` and the shards'
    /// summed report.
    func removeAllDeferringRemovals() -> (RemovedEntries<Key, Value>, ShardReport?) {
        var removed = RemovedEntries<Key, Value>()
        var total: ShardReport?
        for index in 0..<shards.count {
            let report = shards.withLock(at: index) { shard in
                shard.removeAll(removed: &removed)
                return metrics == nil ? nil : shard.takeReport(force: true)
            }
            if let report { total = total.map { Self.sum($0, report) } ?? report }
        }
        return (removed, total)
    }

    /// Releases every entry without telling the listener and refuses every later insert: the
    /// two-tier cache's `close()`, which is not a removal of the cached data. An insert racing it
    /// either lands before its shard is emptied or is dropped, so memory stays empty afterwards.
    func discardAllAndClose() {
        isClosed.store(true, ordering: .relaxed)
        for index in 0..<shards.count {
            var removed = RemovedEntries<Key, Value>()
            shards.withLock(at: index) { $0.removeAll(removed: &removed) }
            _ = consume removed  // released here, after the lock
        }
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

    private func forEachShard(_ body: (inout MemoryShard<Key, Value>, inout RemovedEntries<Key, Value>) -> Void) {
        forEachShard(now: 0) { shard, _, _, removed in body(&shard, &removed) }
    }

    /// Runs `body` on each shard in turn, one lock at a time, finishing each shard's removals
    /// after its lock is dropped.
    private func forEachShard(
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
