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
