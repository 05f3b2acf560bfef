import LMDBCacheStorage

/// The share of a cache's capacity given to the ``MemoryCache/Policy/adaptive`` policy's window,
/// moved by hill climbing on the hit ratio: Caffeine's adaptation ("Adaptive Software Cache
/// Management", Einziger, Eytan, Friedman and Manes, Middleware 2018), with Caffeine's constants
/// but for the sample's length (``WindowClimber/samplesPerCapacity``).
///
/// Lookups are counted in samples of ``WindowClimber/samplesPerCapacity`` times the cache's
/// capacity in entries. After each sample the share moves one step: on in the
/// same direction while the hit ratio rose or held, back while it fell. Steps shrink by ``decay``
/// each sample, so the share settles; a change in the hit ratio of ``restartThreshold`` or more
/// (the workload changed) restarts with a full step. A large window favours recency (LRU-like), a
/// small one frequency (the sketch decides more).
@usableFromInline
struct AdaptiveWindow {
    /// The window's share when a cache starts: 1 % (Caffeine's; TinyLFU's paper found a 1 %
    /// window best on most traces, and the climber grows it where recency pays).
    @usableFromInline static var initialShare: Double { 0.01 }
    /// The largest share: 80 %; the main area keeps a fifth, so frequency never stops counting.
    @usableFromInline static var maximumShare: Double { 0.8 }
    /// A full step: 6.25 % of the capacity (Caffeine's).
    @usableFromInline static var fullStep: Double { 0.0625 }
    /// Each sample's step is this much of the last one (Caffeine's).
    @usableFromInline static var decay: Double { 0.98 }
    /// A change in the hit ratio this large restarts the climb with a full step: 5 points
    /// (Caffeine's).
    @usableFromInline static var restartThreshold: Double { 0.05 }

    /// The window's current share of the capacity, 0 … ``maximumShare``.
    @usableFromInline var share = initialShare
    /// The next move, signed. The first grows the window: from 1 %, only a larger window can show
    /// whether recency pays.
    @usableFromInline var step = fullStep
    @usableFromInline var hits = 0
    @usableFromInline var misses = 0
    /// The hit ratio of the last sample; nil before the first.
    @usableFromInline var previousHitRatio: Double?

    @inlinable
    init() {}

    /// Counts `hits` and `misses`; true when they ended a sample of `period` lookups and the
    /// share moved.
    @inlinable
    mutating func record(hits: Int, misses: Int, period: Int) -> Bool {
        self.hits += hits
        self.misses += misses
        guard self.hits + self.misses >= period else { return false }
        let ratio = Double(self.hits) / Double(self.hits + self.misses)
        self.hits = 0
        self.misses = 0
        defer { previousHitRatio = ratio }
        // The first sample has nothing to compare with: it only sets the baseline.
        guard let previousHitRatio else { return false }
        let change = ratio - previousHitRatio
        let move = change >= 0 ? step : -step
        if abs(change) >= Self.restartThreshold {
            step = move >= 0 ? Self.fullStep : -Self.fullStep
        } else {
            step = move * Self.decay
        }
        let moved = min(max(share + move, 0), Self.maximumShare)
        defer { share = moved }
        return moved != share
    }
}

/// One ``AdaptiveWindow`` for a whole cache, fed by all its shards: each shard counts its own
/// lookups and hands them over every ``MemoryShard/reportPeriod`` once it is full, so the climber
/// sees the cache's hit ratio in samples of the cache's length (a climber per shard would see
/// samples a shard-count times shorter, or take that many times longer to move), and the threads
/// touch its lock once per many lookups. A shard applies a moved share at its next report, so
/// shards read rarely keep the share they last saw for a while.
@usableFromInline
final class WindowClimber: Sendable {
    private let window = Locked(AdaptiveWindow())
    /// The cache's count limit, if any.
    private let countLimit: Int?
    /// True when a cost limit may bind before the count limit.
    private let costBounded: Bool
    private let shards: Int

    /// A climber for a cache of `shards` shards with `countLimit` and, if `costBounded`, a cost
    /// limit. A sample is ``samplesPerCapacity`` times the capacity in entries: the count limit,
    /// or, with a cost limit, the entries the cache holds (a reporting shard's entries, at least
    /// 32, times the shards) when fewer; never fewer than one report.
    @usableFromInline
    init(countLimit: Int?, costBounded: Bool, shards: Int) {
        self.countLimit = countLimit
        self.costBounded = costBounded
        self.shards = max(1, shards)
    }

    /// Adds a shard's `hits` and `misses`; `entries` is what that shard holds (for a cache
    /// bounded by cost alone). Returns the window's share, moved if the lookups ended a sample.
    @usableFromInline
    func report(hits: Int, misses: Int, entries: Int) -> Double {
        var capacity = countLimit ?? .max
        if costBounded {
            let estimate = max(entries, 32).multipliedReportingOverflow(by: shards)
            capacity = min(capacity, estimate.overflow ? .max : estimate.partialValue)
        }
        let period = max(capacity, 1).multipliedReportingOverflow(by: Self.samplesPerCapacity)
        return window.withLock { window in
            _ = window.record(hits: hits, misses: misses, period: period.overflow ? .max : period.partialValue)
            return window.share
        }
    }

    /// A sample's lookups per entry of capacity: 2. Caffeine samples 10, the length of its
    /// sketch's halving period; over a million-request trace that leaves a cache of 15,000 entries
    /// six samples, so the window hardly leaves its 1 % start and a recency-heavy workload stays
    /// below LRU (OLTP at 10,000 entries: 60.2 % against LRU's 60.7 %). Two capacities are the
    /// shortest sample in which a change of the window has turned the cache over and shows in the
    /// hit ratio. Chosen among 1, 2 and 10 on the OLTP and CloudPhysics traces (Performance.md).
    static var samplesPerCapacity: Int { 2 }

    /// The window's current share.
    var share: Double { window.withLock { $0.share } }
}
