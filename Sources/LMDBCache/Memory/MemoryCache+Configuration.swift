import Foundation

extension MemoryCache {
    /// Limits and settings of a memory cache. `nil` means no limit.
    public struct Configuration: Sendable {
        /// Most entries kept. Holds after every insert.
        public var countLimit: Int?
        /// Most total cost kept (the cost given on insert, else the ``weigher``'s, else 0).
        /// Holds after every insert.
        public var costLimit: Int?
        /// Entries not read or written for this long are gone (YYCache's meaning): never returned,
        /// evicted on the next insert into their shard or by trimming. Any length works: past
        /// `UInt64.max` milliseconds it counts as that (never, in practice).
        public var ageLimit: Duration?
        /// How often the trimming scheduler removes expired and idle entries (YYMemoryCache's
        /// default: 5 s). Count and cost need no scheduler: they hold after every insert.
        /// Intervals below 5 ms (zero and negative ones included) run every 5 ms; intervals above
        /// 100 years (`.seconds(Int64.max)`) every 100 years.
        public var autoTrimInterval: Duration
        /// Whether the cache runs its own trimming scheduler (every ``autoTrimInterval``, on a
        /// queue of its own, until the cache goes away). Set it to false when a
        /// ``CacheTrimmingService`` trims instead, or when nothing should. Default true.
        public var automaticTrimming = true
        /// The cost of a value inserted without one, e.g. `{ $0.count }` for arrays.
        public var weigher: (@Sendable (Value) -> Int)?
        /// Number of independently locked shards, rounded up to a power of two; nil chooses one
        /// from the core count and the limits (see ``shardCount``).
        public var shards: Int?
        /// The time source for expiry and age.
        public var clock: CacheClock = .system
        /// What to keep when a count or cost limit is reached: ``Policy/adaptive`` (frequency
        /// admission with an adaptive recency window, the default) or ``Policy/lru``.
        public var policy: Policy

        /// A configuration with the given limits and defaults for everything else.
        public init(
            countLimit: Int? = nil, costLimit: Int? = nil, ageLimit: Duration? = nil,
            autoTrimInterval: Duration = .seconds(5), weigher: (@Sendable (Value) -> Int)? = nil,
            policy: Policy = .adaptive
        ) {
            self.policy = policy
            self.countLimit = countLimit
            self.costLimit = costLimit
            self.ageLimit = ageLimit
            self.autoTrimInterval = autoTrimInterval
            self.weigher = weigher
        }

        /// The number of shards the cache uses.
        ///
        /// By default eight per core (a power of two, at most 256), halved while a shard's share
        /// would fall below 64 entries of the count limit or 512 KiB of the cost limit (RocksDB's
        /// minimum shard size), so small caches keep a useful LRU per shard. Each shard holds an
        /// equal share of each limit and chooses its own evictions.
        public var shardCount: Int {
            if let shards { return Self.powerOfTwo(atLeast: max(1, min(shards, 1 << 16))) }
            var count = min(Self.powerOfTwo(atLeast: ProcessInfo.processInfo.activeProcessorCount * 8), 256)
            while count > 1,
                (countLimit.map { $0 / count < 64 } ?? false) || (costLimit.map { $0 / count < 512 << 10 } ?? false)
            {
                count /= 2
            }
            return count
        }

        /// Shard `index`'s share of `limit`: equal parts, the remainder going to the first shards,
        /// so the shares add up to the limit exactly. A limit of `Int.max` is every shard's: it
        /// means "any entry fits", and a shard's part of it would turn away an entry costing
        /// `Int.max` (the totals, clamped to `Int.max`, still never pass it).
        static func share(of limit: Int?, shard index: Int, of count: Int) -> Int? {
            guard let limit else { return nil }
            guard limit < .max else { return .max }
            let total = max(0, limit)
            return total / count + (index < total % count ? 1 : 0)
        }

        static func powerOfTwo(atLeast value: Int) -> Int {
            var result = 1
            while result < value { result <<= 1 }
            return result
        }
    }
}
