/// Counts of one tier, as ``MemoryCache/statistics`` and ``CacheStatistics`` report them.
public struct TierStatistics: Sendable, Equatable {
    /// Lookups that found a live entry.
    public var hits = 0
    /// Lookups that found nothing, or an expired or idle entry.
    public var misses = 0
    /// Entries removed from the tier, by reason (reasons with none are absent).
    public var removals: [RemovalReason: Int] = [:]

    /// Counts starting at zero.
    public init() {}

    /// Hits over lookups; 0 when there were none.
    public var hitRatio: Double {
        hits + misses == 0 ? 0 : Double(hits) / Double(hits + misses)
    }

    /// Removals for every reason but ``RemovalReason/explicit`` and ``RemovalReason/replaced``.
    public var evictions: Int {
        removals.filter { $0.key != .explicit && $0.key != .replaced }.values.reduce(0, +)
    }
}
