extension MemoryCache {
    /// The number of entries, expired ones not yet removed included.
    public var totalCount: Int {
        (0..<shards.count).reduce(0) { total, index in total + shards.withLock(at: index) { $0.count } }
    }

    /// The total cost of the entries, expired ones not yet removed included; `Int.max` when the
    /// sum is larger (entries may each cost up to `Int.max`).
    public var totalCost: Int {
        Int(
            clamping: (0..<shards.count).reduce(Int128(0)) { total, index in
                total + shards.withLock(at: index) { $0.cost }
            })
    }

    /// Hits, misses and removals by reason since the cache was created.
    public var statistics: TierStatistics {
        var result = TierStatistics()
        var removals = [Int](repeating: 0, count: RemovalReason.allCases.count)
        for index in 0..<shards.count {
            let report = shards.withLock(at: index) { shard in
                let statistics = shard.statistics
                result.hits += statistics.hits
                result.misses += statistics.misses
                for index in removals.indices { removals[index] += statistics.removals[index] }
                return metrics == nil ? nil : shard.takeReport(force: true)
            }
            finish(RemovedEntries(), report)
        }
        for reason in RemovalReason.allCases where removals[reason.index] > 0 {
            result.removals[reason] = removals[reason.index]
        }
        return result
    }
}
