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
    /// Kept apart from `first` so that asking costs no look into the generic optional.
    @usableFromInline var count = 0

    @inlinable
    init() {}

    @inlinable
    var isEmpty: Bool { count == 0 }

    @inlinable
    mutating func append(_ entry: consuming Entry) {
        if count == 0 { first = entry } else { rest.append(entry) }
        count += 1
    }

    /// Calls `body` with each entry, oldest removal first.
    @inlinable
    func forEach(_ body: (Entry) -> Void) {
        guard count > 0, let first else { return }
        body(first)
        rest.forEach(body)
    }
}
