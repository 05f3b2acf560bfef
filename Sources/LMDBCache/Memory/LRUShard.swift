/// One shard of a ``MemoryCache``: a hash index and a least-recently-used list, guarded by the
/// shard's lock (the caller holds it for every call).
///
/// Nodes live inline in one array and link to each other by index; freed nodes form a free list.
/// A hit therefore costs one hash probe and a few integer writes, with no allocation and no
/// reference counting beyond copying the value out. Removed values are handed back to the caller
/// in ``RemovedEntries`` so that they are released, and listeners called, after the lock is dropped.
struct LRUShard<Key: Hashable, Value> {
    struct Node {
        var key: Key?
        var value: Value?
        var cost: Int
        /// Milliseconds since 1970 of the last read or write.
        var accessed: UInt64
        /// Milliseconds since 1970 after which the entry is gone; 0 for never.
        var expires: UInt64
        var tag: UInt32
        /// Towards the most recently used end.
        var newer: Int32
        /// Towards the least recently used end.
        var older: Int32
    }

    /// The shard's share of the cache's limits.
    struct Limits {
        var count: Int?
        var cost: Int?
        /// Milliseconds.
        var age: UInt64?
    }

    private var nodes: [Node] = []
    private var table = SlotTable()
    private var newest: Int32 = -1
    private var oldest: Int32 = -1
    private var firstFree: Int32 = -1
    private(set) var count = 0
    private(set) var cost = 0
    let limits: Limits
    private(set) var statistics = ShardStatistics()
    /// Counts inserts and removals, so that the two-tier cache promotes a value read from disk
    /// only when no write to this shard came between the memory miss and the promotion.
    private(set) var generation: UInt64 = 0

    init(limits: Limits) {
        self.limits = limits
    }

    // MARK: Operations

    /// The live value for `key`, which becomes the most recently used entry.
    ///
    /// An entry found expired, or idle past the age limit, is removed into `removed` and missed.
    mutating func value(forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>)
        -> Value?
    {
        statistics.unreported += 1
        guard let index = find(key, tag: tag) else {
            statistics.misses += 1
            return nil
        }
        let i = Int(index)
        if let reason = staleness(of: nodes[i], now: now) {
            removed.append(remove(index, reason: reason))
            statistics.misses += 1
            return nil
        }
        nodes[i].accessed = now
        if index != newest {
            unlink(index)
            pushNewest(index)
        }
        statistics.hits += 1
        return nodes[i].value
    }

    /// True when a live entry is stored for `key`; not an access.
    func contains(_ key: Key, tag: UInt32, now: UInt64) -> Bool {
        guard let index = find(key, tag: tag) else { return false }
        return staleness(of: nodes[Int(index)], now: now) == nil
    }

    /// Stores `value` as the most recently used entry, then evicts until the limits hold.
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
            let old = nodes[i].value!
            self.cost += cost - nodes[i].cost
            nodes[i].value = value
            nodes[i].cost = cost
            nodes[i].accessed = now
            nodes[i].expires = expires
            if index != newest {
                unlink(index)
                pushNewest(index)
            }
            statistics.removals[RemovalReason.replaced.index] += 1
            removed.append((key, old, .replaced))
        } else {
            let node = Node(
                key: key, value: value, cost: cost, accessed: now, expires: expires, tag: tag, newer: -1, older: -1)
            let index: Int32
            if firstFree >= 0 {
                index = firstFree
                firstFree = nodes[Int(index)].older
                nodes[Int(index)] = node
            } else {
                index = Int32(nodes.count)
                nodes.append(node)
            }
            table.insert(tag: tag, node: index)
            pushNewest(index)
            count += 1
            self.cost += cost
        }
        enforceLimits(now: now, removed: &removed)
    }

    /// Removes the entry for `key`, returning its value.
    mutating func removeValue(forKey key: Key, tag: UInt32, removed: inout RemovedEntries<Key, Value>) -> Value? {
        statistics.unreported += 1
        generation &+= 1
        guard let index = find(key, tag: tag) else { return nil }
        let entry = remove(index, reason: .explicit)
        removed.append(entry)
        return entry.value
    }

    /// Removes every entry and releases the shard's storage.
    mutating func removeAll(removed: inout RemovedEntries<Key, Value>) {
        var index = oldest
        while index >= 0 {
            let node = nodes[Int(index)]
            removed.append((node.key!, node.value!, .explicit))
            index = node.newer
        }
        statistics.removals[RemovalReason.explicit.index] += count
        generation &+= 1
        nodes = []
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
    mutating func trim(
        count countTarget: Int?, cost costTarget: Int?, accessedBefore: UInt64?, now: UInt64,
        removed: inout RemovedEntries<Key, Value>
    ) {
        removeExpired(now: now, removed: &removed)
        while oldest >= 0 {
            let reason: RemovalReason
            if let countTarget, count > countTarget {
                reason = .count
            } else if let costTarget, cost > costTarget {
                reason = .cost
            } else if let accessedBefore, nodes[Int(oldest)].accessed < accessedBefore {
                reason = .age
            } else {
                break
            }
            removed.append(remove(oldest, reason: reason))
        }
    }

    /// Removes every entry whose expiry has passed.
    ///
    /// - Complexity: O(n).
    mutating func removeExpired(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        var index = oldest
        while index >= 0 {
            let next = nodes[Int(index)].newer
            let expires = nodes[Int(index)].expires
            if expires != 0, now >= expires {
                removed.append(remove(index, reason: .expired))
            }
            index = next
        }
    }

    /// What changed since the last report, for the cache's metrics: returned once
    /// ``ShardStatistics/reportBatch`` operations piled up, or always with `force`.
    mutating func takeReport(force: Bool) -> ShardReport? {
        guard force || statistics.unreported >= ShardStatistics.reportBatch else { return nil }
        let report = ShardReport(
            hits: statistics.hits - statistics.reportedHits, misses: statistics.misses - statistics.reportedMisses,
            count: count - statistics.reportedCount, cost: cost - statistics.reportedCost)
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
    private mutating func enforceLimits(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        while oldest >= 0 {
            let reason: RemovalReason
            if let limit = limits.count, count > limit {
                reason = .count
            } else if let limit = limits.cost, cost > limit {
                reason = .cost
            } else if let age = limits.age, Self.isIdle(nodes[Int(oldest)], age: age, now: now) {
                reason = .age
            } else {
                break
            }
            // An entry that is past its expiry anyway is reported as expired.
            let expires = nodes[Int(oldest)].expires
            removed.append(remove(oldest, reason: expires != 0 && now >= expires ? .expired : reason))
        }
    }

    private func staleness(of node: Node, now: UInt64) -> RemovalReason? {
        if node.expires != 0, now >= node.expires { return .expired }
        if let age = limits.age, Self.isIdle(node, age: age, now: now) { return .age }
        return nil
    }

    /// Idle for `age` or longer; a clock that went back counts as no time passing.
    private static func isIdle(_ node: Node, age: UInt64, now: UInt64) -> Bool {
        now > node.accessed && now - node.accessed >= age
    }

    // MARK: Nodes

    @inline(__always)
    private func find(_ key: Key, tag: UInt32) -> Int32? {
        table.find(tag: tag) { nodes[Int($0)].key == key }
    }

    /// Unlinks and frees the node at `index`, returning its entry.
    private mutating func remove(_ index: Int32, reason: RemovalReason) -> RemovedEntries<Key, Value>.Entry {
        let i = Int(index)
        unlink(index)
        table.remove(tag: nodes[i].tag, node: index)
        let entry = (nodes[i].key!, nodes[i].value!, reason)
        count -= 1
        cost -= nodes[i].cost
        nodes[i].key = nil
        nodes[i].value = nil
        nodes[i].older = firstFree
        firstFree = index
        statistics.removals[reason.index] += 1
        return entry
    }

    private mutating func unlink(_ index: Int32) {
        let i = Int(index)
        let newer = nodes[i].newer
        let older = nodes[i].older
        if newer >= 0 { nodes[Int(newer)].older = older } else { newest = older }
        if older >= 0 { nodes[Int(older)].newer = newer } else { oldest = newer }
        nodes[i].newer = -1
        nodes[i].older = -1
    }

    private mutating func pushNewest(_ index: Int32) {
        let i = Int(index)
        nodes[i].older = newest
        nodes[i].newer = -1
        if newest >= 0 { nodes[Int(newest)].newer = index } else { oldest = index }
        newest = index
    }
}

/// A shard's exact counts, kept under its lock so counting costs no shared cache line.
struct ShardStatistics {
    /// Operations after which a shard reports to metrics: metrics lag by at most this many per
    /// shard, and no metric is touched on most operations.
    static let reportBatch = 256

    var hits = 0
    var misses = 0
    /// Indexed by ``RemovalReason/index``.
    var removals = [Int](repeating: 0, count: RemovalReason.allCases.count)

    var unreported = 0
    var reportedHits = 0
    var reportedMisses = 0
    var reportedCount = 0
    var reportedCost = 0
}

/// A shard's changes since its previous report.
struct ShardReport {
    var hits: Int
    var misses: Int
    var count: Int
    var cost: Int
}

/// Entries removed under a shard's lock, to release and report after it is dropped.
///
/// The first entry is stored inline, so the common case (one replaced or evicted value) does not
/// allocate.
struct RemovedEntries<Key, Value> {
    typealias Entry = (key: Key, value: Value, reason: RemovalReason)

    private var first: Entry?
    private var rest: [Entry] = []

    init() {}

    var isEmpty: Bool { first == nil }

    mutating func append(_ entry: Entry) {
        if first == nil { first = entry } else { rest.append(entry) }
    }

    /// Calls `body` with each entry, oldest removal first.
    func forEach(_ body: (Entry) -> Void) {
        guard let first else { return }
        body(first)
        rest.forEach(body)
    }
}
