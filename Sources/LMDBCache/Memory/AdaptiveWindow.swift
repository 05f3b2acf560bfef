/// The share of a shard's capacity given to the ``MemoryCache/Policy/adaptive`` policy's window,
/// moved by hill climbing on the hit ratio (Caffeine's adaptation, from "Adaptive Software Cache
/// Management", Middleware 2018).
///
/// Lookups are counted in samples of ``MemoryShard/samplePeriod`` requests. After each sample
/// the share moves one step: on in the same direction while the hit ratio rose or held, back
/// while it fell. Steps shrink by ``decay`` each sample, so the share settles; a change in the
/// hit ratio of ``restartThreshold`` or more (the workload changed) restarts with a full step.
/// A large window favours recency (LRU-like), a small one frequency (the sketch decides more).
@usableFromInline
struct AdaptiveWindow {
    /// The window's share when a cache starts: 20 %. Caffeine starts at 1 %, right for
    /// frequency-heavy workloads; from 20 % the climber is a few steps from either end of its
    /// range, and until it has moved the policy is still close to LRU on recency-heavy ones.
    @usableFromInline static var initialShare: Double { 0.2 }
    /// The largest share: 80 %; the main area keeps a fifth, so frequency never stops counting.
    @usableFromInline static var maximumShare: Double { 0.8 }
    /// A full step: 6.25 % of the capacity (Caffeine's).
    @usableFromInline static var fullStep: Double { 0.0625 }
    /// Each sample's step is this much of the last one (Caffeine's).
    @usableFromInline static var decay: Double { 0.98 }
    /// A change in the hit ratio this large restarts the climb with a full step: 20 points.
    /// Caffeine uses 5 over samples of ten times the capacity; a shard's samples are short (64
    /// lookups for a small shard, where the hit ratio's noise alone is a few points), and a lower
    /// threshold restarted the climb on noise.
    @usableFromInline static var restartThreshold: Double { 0.2 }

    /// The window's current share of the capacity, 0 … ``maximumShare``.
    @usableFromInline var share = initialShare
    /// The next move, signed. The first grows the window: from the initial 20 %, in the lower part of
    /// the range, only a larger window can show whether recency pays.
    @usableFromInline var step = fullStep
    @usableFromInline var hits = 0
    @usableFromInline var misses = 0
    /// The hit ratio of the last sample; nil before the first.
    @usableFromInline var previousHitRatio: Double?

    @inlinable
    init() {}

    /// Counts one lookup; true when it ended a sample of `period` lookups and the share moved.
    @inlinable
    mutating func record(hit: Bool, period: Int) -> Bool {
        if hit { hits += 1 } else { misses += 1 }
        guard hits + misses >= period else { return false }
        let ratio = Double(hits) / Double(hits + misses)
        hits = 0
        misses = 0
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
