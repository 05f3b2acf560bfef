extension MemoryCache {
    /// How a memory cache chooses what to keep when a count or cost limit is reached.
    ///
    /// Either way every limit holds after every insert, and a value read right after its insert
    /// is that value (unless it alone costs more than a shard's share of the cost limit).
    public enum Policy: Sendable, Hashable {
        /// Admission by frequency within recency segments (the W-TinyLFU family, as in Caffeine),
        /// per shard: a new entry enters a small LRU *window*; when the window overflows, its
        /// least recently used entry joins the *main* area (probation and protected LRU lists)
        /// only if a frequency sketch of recent lookups and inserts rates it more popular than
        /// the main entries it would displace, else it is evicted (reason
        /// ``RemovalReason/count`` or ``RemovalReason/cost``). The window's share of the capacity
        /// adapts by hill climbing on the hit ratio, so recency-heavy workloads get a large
        /// window and frequency-heavy ones a small one. A scan of keys read once does not evict
        /// a working set. The default.
        case adaptive
        /// Least recently used: an insert evicts the entries used longest ago.
        case lru
    }
}
