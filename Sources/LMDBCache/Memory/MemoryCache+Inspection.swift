// What tests and diagnostics read of the adaptive policy's state; nothing here is an access.

extension MemoryCache {
    /// Each shard's window share under ``Policy/adaptive`` (1 under `.lru`, whose one list is
    /// all window): for tests and for the benchmarks' report, not a stable API.
    @_spi(Diagnostics)
    public var windowShares: [Double] {
        (0..<shards.count).map { index in shards.withLock(at: index) { $0.windowShare } }
    }

    /// Each shard's frequency sketch seed (0 where the shard keeps no sketch).
    var sketchSeeds: [UInt64] {
        (0..<shards.count).map { index in shards.withLock(at: index) { $0.sketch.seed } }
    }

    /// The frequency sketch's estimate for `key` in its shard, 0 … 15.
    func estimatedFrequency(of key: Key) -> Int {
        let hash = key.hashValue
        return shards.withLock(at: shardIndex(hash)) { $0.sketch.frequency(SlotTable.tag(hash)) }
    }
}
