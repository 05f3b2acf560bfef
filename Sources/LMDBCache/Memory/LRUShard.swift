/// One shard of a ``MemoryCache``: a hash index and a least-recently-used list, guarded by the
/// shard's lock (the caller holds it for every call).
///
/// Nodes live inline in one array; the LRU list links them by index through a parallel array of
/// links, and freed nodes form a free list. A hit therefore costs one hash probe and a few integer
/// writes (none when the node is among the most recently moved, see ``markUsed(_:)``), with no
/// allocation and no reference counting beyond copying the value out. Removed values are handed back to the caller
/// in ``RemovedEntries`` so that they are released, and listeners called, after the lock is dropped.
@usableFromInline
struct LRUShard<Key: Hashable, Value> {
    @usableFromInline
    struct Node {
        @usableFromInline var key: Key?
        @usableFromInline var value: Value?
        @usableFromInline var cost: Int
        /// Milliseconds since 1970 of the last read or write.
        @usableFromInline var accessed: UInt64
        /// Milliseconds since 1970 after which the entry is gone; 0 for never.
        @usableFromInline var expires: UInt64
        @usableFromInline var tag: UInt32
        /// The shard's ``moves`` when the node last became the most recently used.
        @usableFromInline var moved: UInt32

        @inlinable
        init(key: Key, value: Value, cost: Int, accessed: UInt64, expires: UInt64, tag: UInt32) {
            self.key = key
            self.value = value
            self.cost = cost
            self.accessed = accessed
            self.expires = expires
            self.tag = tag
            moved = 0
        }
    }

    @usableFromInline
    struct Link {
        /// Towards the most recently used end; -1 at it.
        @usableFromInline var newer: Int32
        /// Towards the least recently used end; -1 at it. Links free nodes into the free list.
        @usableFromInline var older: Int32

        @inlinable
        init() {
            newer = -1
            older = -1
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
    /// The LRU list's links, parallel to `nodes` and apart from them: eight to a cache line, so
    /// moving a node touches far less memory than the nodes themselves would.
    @usableFromInline var links: [Link] = []
    @usableFromInline var table = SlotTable()
    @usableFromInline var newest: Int32 = -1
    @usableFromInline var oldest: Int32 = -1
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
    /// Counts moves to the most recently used end (wrapping), to tell how recently a node moved.
    @usableFromInline var moves: UInt32 = 0

    @inlinable
    init(limits: Limits) {
        self.limits = limits
    }

    // MARK: Operations

    /// The live value for `key`, which becomes the most recently used entry.
    ///
    /// An entry found expired, or idle past the age limit, is removed into `removed` and missed.
    /// With `counting` false the look counts neither a hit nor a miss (a second look on behalf of
    /// a caller whose first look was counted).
    @inlinable
    mutating func value(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>, counting: Bool = true
    ) -> Value? {
        let counted = counting ? 1 : 0
        statistics.unreported += counted
        guard let index = find(key, tag: tag) else {
            statistics.misses += counted
            return nil
        }
        let i = Int(index)
        if let reason = staleness(expires: nodes[i].expires, accessed: nodes[i].accessed, now: now) {
            removed.append(remove(index, reason: reason))
            statistics.misses += counted
            return nil
        }
        nodes[i].accessed = now
        markUsed(index)
        statistics.hits += counted
        return nodes[i].value
    }

    /// True when a live entry is stored for `key`; not an access.
    @inlinable
    func contains(_ key: Key, tag: UInt32, now: UInt64) -> Bool {
        guard let index = find(key, tag: tag) else { return false }
        return staleness(expires: nodes[Int(index)].expires, accessed: nodes[Int(index)].accessed, now: now) == nil
    }

    /// Stores `value` as the most recently used entry, then evicts until the limits hold.
    @inlinable
    mutating func insert(
        _ value: Value, forKey key: Key, tag: UInt32, cost: Int, expires: UInt64, now: UInt64,
        removed: inout RemovedEntries<Key, Value>
    ) {
        statistics.unreported += 1
        generation &+= 1
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
            self.cost += Int128(cost) - Int128(nodes[i].cost)
            nodes[i].value = value
            nodes[i].cost = cost
            nodes[i].accessed = now
            nodes[i].expires = expires
            markUsed(index)
            statistics.removals[RemovalReason.replaced.index] += 1
            removed.append((key, old, .replaced))
        } else {
            let node = Node(key: key, value: value, cost: cost, accessed: now, expires: expires, tag: tag)
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
            pushNewest(index)
            count += 1
            self.cost += Int128(cost)
        }
        enforceLimits(now: now, removed: &removed)
    }

    /// Removes the entry for `key`, returning its value.
    @inlinable
    mutating func removeValue(forKey key: Key, tag: UInt32, removed: inout RemovedEntries<Key, Value>) -> Value? {
        statistics.unreported += 1
        generation &+= 1
        guard let index = find(key, tag: tag) else { return nil }
        let entry = remove(index, reason: .explicit)
        removed.append(entry)
        return entry.value
    }

    /// Removes every entry and releases the shard's storage.
    @inlinable
    mutating func removeAll(removed: inout RemovedEntries<Key, Value>) {
        var index = oldest
        while index >= 0 {
            let node = nodes[Int(index)]
            removed.append((node.key!, node.value!, .explicit))
            index = links[Int(index)].newer
        }
        statistics.removals[RemovalReason.explicit.index] += count
        generation &+= 1
        nodes = []
        links = []
        table.removeAll()
        newest = -1
        oldest = -1
        firstFree = -1
        count = 0
        cost = 0
    }

    /// Removes expired entries, then least recently used ones while there are more than `count`
    /// entries or `cost` cost, or while the oldest was last used before `accessedBefore`.
    ///
    /// - Complexity: O(n) for the expiry scan, plus O(1) per removal.
    @inlinable
    mutating func trim(
        count countTarget: Int?, cost costTarget: Int?, accessedBefore: UInt64?, now: UInt64,
        removed: inout RemovedEntries<Key, Value>
    ) {
        removeExpired(now: now, removed: &removed)
        while oldest >= 0 {
            let reason: RemovalReason
            if let countTarget, count > countTarget {
                reason = .count
            } else if let costTarget, cost > Int128(costTarget) {
                reason = .cost
            } else if let accessedBefore, nodes[Int(oldest)].accessed < accessedBefore {
                reason = .age
            } else {
                break
            }
            removed.append(remove(oldest, reason: reason))
        }
    }

    /// Slots in the node array, live or free: the range a batched expiry scan walks.
    @usableFromInline var nodeSlots: Int { nodes.count }

    /// Removes the expired entries among node slots `range` (clamped to the array): one batch of
    /// the trimming scheduler's expiry scan, which walks slots rather than the list because slots
    /// stay put while the lock is dropped between batches.
    @usableFromInline
    mutating func removeExpired(inSlots range: Range<Int>, now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        for i in range.clamped(to: 0..<nodes.count) where nodes[i].key != nil {
            let expires = nodes[i].expires
            if expires != 0, now >= expires { removed.append(remove(Int32(i), reason: .expired)) }
        }
    }

    /// Removes up to `limit` entries last used before `cutoff`, oldest first; true when none is left.
    @usableFromInline
    mutating func removeIdle(accessedBefore cutoff: UInt64, limit: Int, removed: inout RemovedEntries<Key, Value>)
        -> Bool
    {
        for _ in 0..<limit {
            guard oldest >= 0, nodes[Int(oldest)].accessed < cutoff else { return true }
            removed.append(remove(oldest, reason: .age))
        }
        return oldest < 0 || nodes[Int(oldest)].accessed >= cutoff
    }

    /// Removes every entry whose expiry has passed.
    ///
    /// - Complexity: O(n).
    @inlinable
    mutating func removeExpired(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        var index = oldest
        while index >= 0 {
            let next = links[Int(index)].newer
            let expires = nodes[Int(index)].expires
            if expires != 0, now >= expires {
                removed.append(remove(index, reason: .expired))
            }
            index = next
        }
    }

    /// What changed since the last report, for the cache's metrics: returned once
    /// ``ShardStatistics/reportBatch`` operations piled up, or always with `force`.
    @inlinable
    mutating func takeReport(force: Bool) -> ShardReport? {
        guard force || statistics.unreported >= ShardStatistics.reportBatch else { return nil }
        let report = ShardReport(
            hits: statistics.hits - statistics.reportedHits, misses: statistics.misses - statistics.reportedMisses,
            count: count - statistics.reportedCount,
            // Within ±Int.max, so a metric can negate it.
            cost: Int(clamping: min(max(cost - statistics.reportedCost, -Int128(Int.max)), Int128(Int.max))))
        statistics.unreported = 0
        statistics.reportedHits = statistics.hits
        statistics.reportedMisses = statistics.misses
        statistics.reportedCount = count
        statistics.reportedCost = cost
        return report
    }

    // MARK: Limits

    /// Evicts least recently used entries past the count and cost limits, then entries idle
    /// past the age limit (the oldest end holds the longest idle).
    @inlinable
    mutating func enforceLimits(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        while oldest >= 0 {
            let reason: RemovalReason
            if let limit = limits.count, count > limit {
                reason = .count
            } else if let limit = limits.cost, cost > Int128(limit) {
                reason = .cost
            } else if let age = limits.age, Self.isIdle(accessed: nodes[Int(oldest)].accessed, age: age, now: now) {
                reason = .age
            } else {
                break
            }
            // An entry that is past its expiry anyway is reported as expired.
            let expires = nodes[Int(oldest)].expires
            removed.append(remove(oldest, reason: expires != 0 && now >= expires ? .expired : reason))
        }
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
        unlink(index)
        table.remove(tag: nodes[i].tag, node: index)
        let entry = (nodes[i].key.take()!, nodes[i].value.take()!, reason)
        count -= 1
        cost -= Int128(nodes[i].cost)
        links[i].older = firstFree
        firstFree = index
        statistics.removals[reason.index] += 1
        return entry
    }

    /// Makes the node at `index` the most recently used, unless it is already among the most
    /// recently moved eighth of the shard: such a node is far from eviction, and leaving it saves
    /// the list update (two nodes' cache lines) on most hits of hot keys. A node's place therefore
    /// understates its recency by less than an eighth of the shard; small shards are exact.
    @inlinable
    mutating func markUsed(_ index: Int32) {
        let i = Int(index)
        if index == newest || Int(moves &- nodes[i].moved) < count >> 3 { return }
        unlink(index)
        pushNewest(index)
    }

    @inlinable
    mutating func unlink(_ index: Int32) {
        let i = Int(index)
        let link = links[i]
        if link.newer >= 0 { links[Int(link.newer)].older = link.older } else { newest = link.older }
        if link.older >= 0 { links[Int(link.older)].newer = link.newer } else { oldest = link.newer }
        links[i] = Link()
    }

    @inlinable
    mutating func pushNewest(_ index: Int32) {
        let i = Int(index)
        moves &+= 1
        nodes[i].moved = moves
        links[i].older = newest
        links[i].newer = -1
        if newest >= 0 { links[Int(newest)].newer = index } else { oldest = index }
        newest = index
    }
}

/// A shard's exact counts, kept under its lock so counting costs no shared cache line.
@usableFromInline
struct ShardStatistics {
    /// Operations after which a shard reports to metrics: metrics lag by at most this many per
    /// shard, and no metric is touched on most operations.
    @usableFromInline static let reportBatch = 256

    @usableFromInline var hits = 0
    @usableFromInline var misses = 0
    /// Indexed by ``RemovalReason/index``.
    @usableFromInline var removals = [Int](repeating: 0, count: RemovalReason.allCases.count)

    @usableFromInline var unreported = 0
    @usableFromInline var reportedHits = 0
    @usableFromInline var reportedMisses = 0
    @usableFromInline var reportedCount = 0
    @usableFromInline var reportedCost: Int128 = 0

    @inlinable
    init() {}
}

/// A shard's changes since its previous report.
@usableFromInline
struct ShardReport {
    @usableFromInline var hits: Int
    @usableFromInline var misses: Int
    @usableFromInline var count: Int
    @usableFromInline var cost: Int

    @inlinable
    init(hits: Int, misses: Int, count: Int, cost: Int) {
        self.hits = hits
        self.misses = misses
        self.count = count
        self.cost = cost
    }
}

/// Entries removed under a shard's lock, to release and report after it is dropped.
///
/// The first entry is stored inline, so the common case (one replaced or evicted value) does not
/// allocate.
@usableFromInline
struct RemovedEntries<Key, Value> {
    @usableFromInline typealias Entry = (key: Key, value: Value, reason: RemovalReason)

    @usableFromInline var first: Entry?
    @usableFromInline var rest: [Entry] = []

    @inlinable
    init() {}

    @usableFromInline var isEmpty: Bool { first == nil }

    @usableFromInline var count: Int { first == nil ? 0 : 1 + rest.count }

    @inlinable
    mutating func append(_ entry: Entry) {
        if first == nil { first = entry } else { rest.append(entry) }
    }

    /// Calls `body` with each entry, oldest removal first.
    @inlinable
    func forEach(_ body: (Entry) -> Void) {
        guard let first else { return }
        body(first)
        rest.forEach(body)
    }
}
