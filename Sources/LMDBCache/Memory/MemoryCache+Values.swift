import Logging
import Metrics
import Synchronization

// The memory tier's values: lookups, inserts (admission and eviction in the key's shard) and
// removals by key, by tag and of everything, with the removal listener called after the shard's
// lock is released.

extension MemoryCache {
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
}
