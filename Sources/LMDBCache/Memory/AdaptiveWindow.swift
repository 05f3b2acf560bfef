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
    /// The window's share when a cache starts: 1 %, TinyLFU's default, good for most workloads.
    @usableFromInline static var initialShare: Double { 0.01 }
    /// The largest share: 80 %; the main area keeps a fifth, so frequency never stops counting.
    @usableFromInline static var maximumShare: Double { 0.8 }
    /// A full step: 6.25 % of the capacity.
    @usableFromInline static var fullStep: Double { 0.0625 }
    /// Each sample's step is this much of the last one.
    @usableFromInline static var decay: Double { 0.98 }
    /// A change in the hit ratio this large restarts the climb with a full step.
    @usableFromInline static var restartThreshold: Double { 0.05 }

    /// The window's current share of the capacity, 0 … ``maximumShare``.
    @usableFromInline var share = initialShare
    /// The next move, signed. The first grows the window: from 1 %, near the lower bound, only a
    /// larger window can show whether recency pays.
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
