/// One shard of a ``MemoryCache``: a hash index and its entries in LRU lists, guarded by the
/// shard's lock (the caller holds it for every call).
///
/// Nodes live inline in one array; the lists link them by index through a parallel array of
/// links, and freed nodes form a free list. A hit therefore costs one hash probe and a few integer
/// writes (none when the node is among the most recently moved, see ``markUsed(_:)``), with no
/// allocation and no reference counting beyond copying the value out. Removed values are handed
/// back to the caller in ``RemovedEntries`` so that they are released, and listeners called, after
/// the lock is dropped.
///
/// Under ``MemoryCache/Policy/lru`` (or with neither a count nor a cost limit) every entry is in
/// one list, the ``window``, in LRU order. Under ``MemoryCache/Policy/adaptive`` the shard is a
/// W-TinyLFU cache (MemoryShard+Admission.swift): new entries enter the ``window``; entries that
/// leave it join the ``probation`` list if the ``sketch`` rates them above the entries they would
/// displace; a hit in probation moves an entry to ``protected``.
@usableFromInline
struct MemoryShard<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var cost: Int
        /// Milliseconds since 1970 of the last read or write.
        @usableFromInline var accessed: UInt64
        /// Milliseconds since 1970 after which the entry is gone; 0 for never.
        @usableFromInline var expires: UInt64
        /// Milliseconds since 1970 of the write that stored the value (for `refreshAfter`).
        @usableFromInline var stored: UInt64
        @usableFromInline var tag: UInt32
        /// Bits 0..<27: ``moved``; bit 27: ``isPromoted``; bit 28: ``hasTags``; bits 29 and 30:
        /// ``segment``; bit 31: ``hasServedUntil``. Packed so that a node with a `String` key and an array value takes
        /// 64 bytes.
        @usableFromInline var state: UInt32

        @inlinable
        init(key: Key, value: Value, cost: Int, accessed: UInt64, expires: UInt64, stored: UInt64, tag: UInt32) {
            self.key = key
            self.value = value
            self.cost = cost
            self.accessed = accessed
            self.expires = expires
            self.stored = stored
            self.tag = tag
            state = 0  // moved 0, no tags, in the window, no served-until time
        }

        /// The bits of ``state`` that hold ``moved``.
        @inlinable static var movedMask: UInt32 { (1 << 27) - 1 }

        /// The low 27 bits of the shard's ``MemoryShard/moves`` when the node last became the
        /// most recently used of its list (compare with ``movesSince(_:)``).
        @inlinable var moved: UInt32 {
            get { state & Self.movedMask }
            set { state = (state & ~Self.movedMask) | (newValue & Self.movedMask) }
        }

        /// Moves made in the shard since this node was last made the newest of its list, given
        /// the shard's count now (modulo 2^27).
        @inlinable func movesSince(_ moves: UInt32) -> UInt32 {
            (moves &- state) & Self.movedMask
        }

        /// The list the node is in.
        @inlinable var segment: Segment {
            get {
                switch (state >> 29) & 3 {
                case 0: return .window
                case 1: return .probation
                default: return .protected
                }
            }
            set { state = (state & ~(3 << 29)) | (UInt32(newValue.rawValue & 3) << 29) }
        }

        /// True when the value was read from the disk tier (a promotion), not inserted: a
        /// promotion refused for a different record of the key drops it (``MemoryShard/refusePromotion(_:tag:removed:)``).
        @inlinable var isPromoted: Bool {
            get { state & (1 << 27) != 0 }
            set { state = newValue ? state | (1 << 27) : state & ~(1 << 27) }
        }

        /// True when the shard's ``MemoryShard/entryTags`` holds tags for this node (and
        /// ``MemoryShard/taggedNodes`` the node under each of them). Untagged nodes, the common
        /// case, never touch those tables: a removal checks this bit first.
        @inlinable var hasTags: Bool {
            get { state & (1 << 28) != 0 }
            set { state = newValue ? state | (1 << 28) : state & ~(1 << 28) }
        }

        /// True when the shard's ``MemoryShard/servedUntil`` holds a time for this node: the
        /// entry is kept past the time lookups stop returning it (the two-tier cache's
        /// `staleIfError`).
        @inlinable var hasServedUntil: Bool {
            get { state & (1 << 31) != 0 }
            set { state = newValue ? state | (1 << 31) : state & ~(1 << 31) }
        }
    }

    /// The shard's share of the cache's limits.
    @usableFromInline
    struct Limits {
        @usableFromInline var count: Int?
        @usableFromInline var cost: Int?
        /// Milliseconds.
        @usableFromInline var age: UInt64?

        @usableFromInline
        init(count: Int?, cost: Int?, age: UInt64?) {
            self.count = count
            self.cost = cost
            self.age = age
        }
    }

    @usableFromInline var nodes: [Node] = []
    /// The lists' links, parallel to `nodes` and apart from them: eight to a cache line, so
    /// moving a node touches far less memory than the nodes themselves would.
    @usableFromInline var links: [Link] = []
    @usableFromInline var table = SlotTable()
    /// New entries; under `.lru`, every entry.
    @usableFromInline var window = ListEnds()
    /// Entries admitted to the main area and not read since (`.adaptive` only).
    @usableFromInline var probation = ListEnds()
    /// Entries read while in probation (`.adaptive` only).
    @usableFromInline var protected = ListEnds()
    @usableFromInline var firstFree: Int32 = -1
    @usableFromInline var count = 0
    /// 128 bits: entries may cost up to `Int.max` each (a cost limit of `.max` admits them), and
    /// their sum must not trap.
    @usableFromInline var cost: Int128 = 0
    @usableFromInline let limits: Limits
    @usableFromInline var statistics = ShardStatistics()
    /// Counts inserts and removals, so that the two-tier cache promotes a value read from disk
    /// only when no write to this shard came between the memory miss and the promotion.
    @usableFromInline var generation: UInt64 = 0
    /// Counts moves to the most recently used end of a list (wrapping), to tell how recently a
    /// node moved.
    @usableFromInline var moves: UInt32 = 0
    /// For each node kept past the time lookups stop returning it (the two-tier cache's
    /// `staleIfError`; flagged ``Node/hasServedUntil``): that time, in milliseconds since 1970.
    /// The node's ``Node/expires`` is when it is gone. Few entries have one, so they live here
    /// rather than in every node.
    @usableFromInline var servedUntil: [Int32: UInt64] = [:]
    /// The last few promotions refused (``refusePromotion(_:tag:removed:)``): the key's
    /// slot tag and the shard's generation then. A ring of ``refusalMemory``, allocated by the
    /// first refusal.
    @usableFromInline var refusals: [(tag: UInt32, generation: UInt64)] = []
    @usableFromInline var nextRefusal = 0
    @inlinable static var refusalMemory: Int { 8 }
    /// For each node that carries tags (flagged ``Node/hasTags``): its tags. Few entries have
    /// any, so they live here rather than in every node.
    @usableFromInline var entryTags: [Int32: EntryTags] = [:]
    /// The nodes carrying each tag, by the tag's stored bytes (``EntryTags/storedBytes(of:)``):
    /// a removal by tag finds its entries without a scan. Holds exactly the live nodes' tags:
    /// every removal of a node goes through ``remove(_:reason:)`` or ``removeAll(removed:)``,
    /// which drop it, and no set is ever left empty.
    @usableFromInline var taggedNodes: [[UInt8]: Set<Int32>] = [:]

    /// True under `.adaptive` with a count or cost limit: the shard admits by frequency.
    @usableFromInline let isAdaptive: Bool
    /// Recent popularity by key (empty unless ``isAdaptive``).
    @usableFromInline var sketch: FrequencySketch
    /// Moves the window's share for the whole cache (nil unless ``isAdaptive``).
    @usableFromInline let climber: WindowClimber?
    /// The window's share of the capacity the ``budgets`` were made for.
    @usableFromInline var appliedShare = AdaptiveWindow.initialShare
    /// Lookups counted since the last report to the ``climber``.
    @usableFromInline var sampleHits = 0
    @usableFromInline var sampleMisses = 0
    /// What the window and the protected list may hold, from the limits and the window's share.
    @usableFromInline var budgets = SegmentBudgets()
    /// Set at the first eviction by count or cost: the window adapts only once the shard is full.
    @usableFromInline var isFull = false
    /// The hash tag of the last key missed, until an insert of it (a fill of that miss) or the
    /// next miss: the fill is not counted again in the ``sketch``.
    @usableFromInline var lastMissTag: UInt32?
    /// Set once an entry with an expiry is stored: until then no entry can be stale but by the
    /// age limit, and inserts skip looking for stale entries.
    @usableFromInline var hasExpiring = false
    /// xorshift state for admitting a random few warm candidates (seeded per shard).
    @usableFromInline var random: UInt64

    /// An empty shard.
    ///
    /// - Parameters:
    ///   - limits: the shard's share of the cache's limits.
    ///   - adaptive: the `.adaptive` policy; ignored without a count or cost limit (nothing is
    ///     ever evicted for size, so there is nothing to admit).
    ///   - seed: scrambles the sketch's hash and seeds the random admissions.
    ///   - climber: the cache's window climber, shared by its shards; nil: one for this shard
    ///     alone (under `.adaptive`).
    @inlinable
    init(limits: Limits, adaptive: Bool = false, seed: UInt64 = 0, climber: WindowClimber? = nil) {
        self.limits = limits
        isAdaptive = adaptive && (limits.count != nil || limits.cost != nil)
        sketch = isAdaptive ? FrequencySketch(capacity: Self.sketchCapacity(limits), seed: seed) : FrequencySketch()
        self.climber =
            isAdaptive
            ? climber ?? WindowClimber(countLimit: limits.count, costBounded: limits.cost != nil, shards: 1) : nil
        random = seed | 1
        // Under `.lru` the one list has no budget of its own.
        budgets = isAdaptive ? SegmentBudgets(limits: limits, windowShare: appliedShare) : SegmentBudgets()
    }

    // MARK: Operations

    /// The live value for `key`, which becomes the most recently used entry of its list.
    ///
    /// An entry found expired, or idle past the age limit, is removed into `removed` and missed;
    /// one past the time it is served until (kept to be served stale) is missed and kept.
    /// With `counting` false the look counts neither a hit nor a miss (a second look on behalf of
    /// a caller whose first look was counted), nor an access for the adaptive policy.
    @inlinable
    mutating func value(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>, counting: Bool = true
    ) -> Value? {
        guard let found = entry(forKey: key, tag: tag, now: now, removed: &removed, counting: counting, stale: false)
        else { return nil }
        return found.value
    }

    /// ``value(forKey:tag:now:removed:counting:)`` that also returns when the value was stored and,
    /// with `stale`, an entry kept past the time it is served until (flagged `isStale`, with the
    /// time it is gone; a miss, not a use: its place in the lists stays).
    @inlinable
    mutating func entry(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>, counting: Bool,
        stale: Bool
    ) -> StoredValue<Value>? {
        let counted = counting ? 1 : 0
        statistics.unreported += counted
        if isAdaptive && counting { sketch.increment(tag) }
        guard let index = find(key, tag: tag) else {
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                // An uncounted look repeats a counted one: its fill is that access too.
                lastMissTag = tag
            }
            return nil
        }
        let i = Int(index)
        if let reason = staleness(expires: nodes[i].expires, accessed: nodes[i].accessed, now: now) {
            removed.append(remove(index, reason: reason))
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                lastMissTag = tag
            }
            return nil
        }
        if nodes[i].hasServedUntil, now >= servedUntil[index] ?? 0 {
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                lastMissTag = tag
            }
            return stale
                ? StoredValue(value: nodes[i].value!, stored: nodes[i].stored, staleUntil: nodes[i].expires) : nil
        }
        nodes[i].accessed = now
        markUsed(index)
        statistics.hits += counted
        if isAdaptive && counting { sampleLookup(hit: true) }
        return StoredValue(value: nodes[i].value!, stored: nodes[i].stored, staleUntil: 0)
    }

    /// When the live entry for `key` was stored and when it expires (0: never); nil when there
    /// is none. Not an access.
    @inlinable
    func metadata(forKey key: Key, tag: UInt32, now: UInt64) -> (stored: UInt64, expires: UInt64)? {
        guard let index = find(key, tag: tag), isServed(Int(index), now: now) else { return nil }
        let node = nodes[Int(index)]
        return (node.stored, node.hasServedUntil ? servedUntil[index] ?? node.expires : node.expires)
    }

    /// Neither gone (expired, idle past the age limit) nor kept only to be served stale.
    @inlinable
    func isServed(_ i: Int, now: UInt64) -> Bool {
        staleness(expires: nodes[i].expires, accessed: nodes[i].accessed, now: now) == nil
            && (!nodes[i].hasServedUntil || now < servedUntil[Int32(i)] ?? 0)
    }

    /// Records when lookups stop returning the node at `index` (0: when it is gone).
    @inlinable
    mutating func setServedUntil(_ time: UInt64, at index: Int32) {
        if time != 0 {
            servedUntil[index] = time
            nodes[Int(index)].hasServedUntil = true
        } else if nodes[Int(index)].hasServedUntil {
            servedUntil[index] = nil
            nodes[Int(index)].hasServedUntil = false
        }
    }

    /// True when a live entry is stored for `key`; not an access.
    @inlinable
    func contains(_ key: Key, tag: UInt32, now: UInt64) -> Bool {
        guard let index = find(key, tag: tag) else { return false }
        return isServed(Int(index), now: now)
    }

    /// Stores `value` as the most recently used entry, then evicts until the limits hold.
    ///
    /// A new entry enters the window (under `.lru`, the only list) and stays there at least until
    /// the next insert into the shard, whatever the policy: a read right after an insert finds it.
    /// `servedUntil` (0: until `expires`) and `stored` (nil: `now`) are the node's fields; `tags`
    /// replace any the entry had (``EntryTags/none``: the entry is untagged).
    @inlinable
    mutating func insert(
        _ value: Value, forKey key: Key, tag: UInt32, cost: Int, expires: UInt64, servedUntil: UInt64 = 0,
        stored: UInt64? = nil, now: UInt64, removed: inout RemovedEntries<Key, Value>, tags: EntryTags = .none,
        promoted: Bool = false
    ) {
        statistics.unreported += 1
        generation &+= 1
        countWrite(tag: tag)
        if expires != 0 { hasExpiring = true }
        if let limit = limits.cost, cost > limit {
            // It could never stay: it replaces the old value and goes at once, evicting nothing else.
            if let index = find(key, tag: tag) { removed.append(remove(index, reason: .replaced)) }
            statistics.removals[RemovalReason.cost.index] += 1
            removed.append((key, value, .cost))
            return
        }
        if let index = find(key, tag: tag) {
            let i = Int(index)
            // Taken, not copied: the old value is released by the caller, after the lock.
            let old = nodes[i].value.take()!
            let change = Int128(cost) - Int128(nodes[i].cost)
            self.cost += change
            self[list: nodes[i].segment].cost += change
            nodes[i].value = value
            nodes[i].cost = cost
            nodes[i].accessed = now
            nodes[i].expires = expires
            nodes[i].stored = stored ?? now
            nodes[i].isPromoted = promoted
            setServedUntil(servedUntil, at: index)
            if nodes[i].hasTags || !tags.isEmpty { setTags(tags, at: index) }
            if isAdaptive && change > 0 {
                // A costlier value may make room by evicting: it starts over as the window's newest
                // entry, which stays until the next insert (read your writes), and is judged again
                // when it leaves the window. A value costing no more evicts nothing, and is a use.
                detach(index)
                attach(index, to: .window)
            } else {
                markUsed(index)
            }
            statistics.removals[RemovalReason.replaced.index] += 1
            removed.append((key, old, .replaced))
            // Nothing grew, nothing can be stale, and the lists are within their budgets (the
            // window's share may have moved since the last insert): nothing to evict or move.
            if change <= 0 && limits.age == nil && !hasExpiring && segmentsWithinBudgets { return }
        } else {
            let node = Node(
                key: key, value: value, cost: cost, accessed: now, expires: expires, stored: stored ?? now, tag: tag)
            let index: Int32
            if firstFree >= 0 {
                index = firstFree
                firstFree = links[Int(index)].older
                nodes[Int(index)] = node
            } else {
                index = Int32(nodes.count)
                nodes.append(node)
                links.append(Link())
            }
            table.insert(tag: tag, node: index)
            attach(index, to: .window)
            if promoted { nodes[Int(index)].isPromoted = true }
            if servedUntil != 0 { setServedUntil(servedUntil, at: index) }
            // Before the limits are enforced: an entry evicted at once leaves the index with it.
            if !tags.isEmpty { setTags(tags, at: index) }
            count += 1
            self.cost += Int128(cost)
            if limits.count == nil, count > sketch.capacity { sketch.ensureCapacity(count) }
        }
        enforceLimits(now: now, removed: &removed)
    }

    /// Counts an access of the key whose hash tag is `tag` for the adaptive policy, without a
    /// lookup: a value read from disk whose promotion into memory was skipped.
    @inlinable
    mutating func recordAccess(tag: UInt32) {
        countWrite(tag: tag)
    }

    /// Counts an insert of the key whose hash tag is `tag` in the sketch, unless it fills the
    /// shard's last miss: a miss and the insert that fills it are one access of the key, counted
    /// at the miss (as Caffeine counts a load once). Any other insert is an access of its own.
    @inlinable
    mutating func countWrite(tag: UInt32) {
        guard isAdaptive else { return }
        if lastMissTag == tag {
            lastMissTag = nil
        } else {
            sketch.increment(tag)
        }
    }

    /// Removes the entry for `key`, returning its value if it was live (one expired, idle past
    /// the age limit, or kept only to be served stale is removed all the same, and not returned).
    @inlinable
    mutating func removeValue(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>
    ) -> Value? {
        statistics.unreported += 1
        generation &+= 1
        guard let index = find(key, tag: tag) else { return nil }
        let served = isServed(Int(index), now: now)
        let entry = remove(index, reason: .explicit)
        removed.append(entry)
        return served ? entry.value : nil
    }

    /// Removes every entry and releases the shard's storage (the adaptive policy's state stays).
    @inlinable
    mutating func removeAll(removed: inout RemovedEntries<Key, Value>) {
        for segment in Segment.evictionOrder {
            var index = self[list: segment].oldest
            while index >= 0 {
                let node = nodes[Int(index)]
                removed.append((node.key!, node.value!, .explicit))
                index = links[Int(index)].newer
            }
        }
        statistics.removals[RemovalReason.explicit.index] += count
        generation &+= 1
        nodes = []
        links = []
        servedUntil = [:]
        refusals = []
        entryTags = [:]
        taggedNodes = [:]
        table.removeAll()
        window = ListEnds()
        probation = ListEnds()
        protected = ListEnds()
        firstFree = -1
        count = 0
        cost = 0
    }

    @inlinable
    func staleness(expires: UInt64, accessed: UInt64, now: UInt64) -> RemovalReason? {
        if expires != 0, now >= expires { return .expired }
        if let age = limits.age, Self.isIdle(accessed: accessed, age: age, now: now) { return .age }
        return nil
    }

    /// Idle for `age` or longer; a clock that went back counts as no time passing.
    @inlinable
    static func isIdle(accessed: UInt64, age: UInt64, now: UInt64) -> Bool {
        now > accessed && now - accessed >= age
    }

    // MARK: Nodes

    @inlinable @inline(__always)
    func find(_ key: Key, tag: UInt32) -> Int32? {
        table.find(tag: tag) { nodes[Int($0)].key == key }
    }

    /// Unlinks and frees the node at `index`, returning its entry.
    @inlinable
    mutating func remove(_ index: Int32, reason: RemovalReason) -> RemovedEntries<Key, Value>.Entry {
        let i = Int(index)
        detach(index)
        table.remove(tag: nodes[i].tag, node: index)
        if nodes[i].hasServedUntil { setServedUntil(0, at: index) }
        if nodes[i].hasTags { setTags(.none, at: index) }
        let entry = (nodes[i].key.take()!, nodes[i].value.take()!, reason)
        count -= 1
        cost -= Int128(nodes[i].cost)
        links[i].older = firstFree
        firstFree = index
        statistics.removals[reason.index] += 1
        return entry
    }
}

/// A value a get-or-load found, with when it was stored and, for one kept past its expiry to be
/// served stale (``Freshness/staleIfError``), when it is gone.
@usableFromInline
struct StoredValue<Value> {
    @usableFromInline var value: Value
    /// Milliseconds since 1970 of the write that stored it.
    @usableFromInline var stored: UInt64
    /// For a value past its expiry: when it is gone (milliseconds since 1970); else 0.
    @usableFromInline var staleUntil: UInt64
    /// Past its expiry: never returned by plain lookups.
    @usableFromInline var isStale: Bool { staleUntil != 0 }

    @inlinable
    init(value: Value, stored: UInt64, staleUntil: UInt64) {
        self.value = value
        self.stored = stored
        self.staleUntil = staleUntil
    }
}
