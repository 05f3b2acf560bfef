import Metrics

/// The swift-metrics instruments of one cache tier. Dimensions are bounded: the cache's name,
/// the tier and, for removals, the reason.
@usableFromInline
final class TierMetrics: Sendable {
    let hits: Counter
    let misses: Counter
    /// Indexed by ``RemovalReason/index``.
    let removals: [Counter]
    let entries: Meter
    let cost: Meter

    init(cache name: String, tier: CacheTier) {
        let dimensions = [("cache", name), ("tier", tier.rawValue)]
        hits = Counter(label: "lmdbcache_hits_total", dimensions: dimensions)
        misses = Counter(label: "lmdbcache_misses_total", dimensions: dimensions)
        removals = RemovalReason.allCases.map {
            Counter(label: "lmdbcache_removals_total", dimensions: dimensions + [("reason", $0.rawValue)])
        }
        entries = Meter(label: "lmdbcache_entries", dimensions: dimensions)
        cost = Meter(label: "lmdbcache_cost", dimensions: dimensions)
    }

    @usableFromInline
    func count(_ removal: RemovalReason) {
        removals[removal.index].increment()
    }

    /// Adds a memory shard's changes since its last report.
    @usableFromInline
    func record(_ report: ShardReport) {
        if report.hits > 0 { hits.increment(by: Int64(report.hits)) }
        if report.misses > 0 { misses.increment(by: Int64(report.misses)) }
        Self.add(report.count, to: entries)
        Self.add(report.cost, to: cost)
    }

    private static func add(_ delta: Int, to meter: Meter) {
        if delta > 0 { meter.increment(by: Double(delta)) } else if delta < 0 { meter.decrement(by: Double(-delta)) }
    }
}
