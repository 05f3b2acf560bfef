/// Why an entry left a cache tier.
public enum RemovalReason: String, Sendable, CaseIterable, Hashable {
    /// Removed by a call: `removeValue(forKey:)`, a `nil` assignment or `removeAll()`.
    case explicit
    /// Overwritten by a new value for the same key.
    case replaced
    /// Its per-entry expiry (`expiresAfter`) passed.
    case expired
    /// Evicted to keep the tier within its count limit: least recently used first, or, in a
    /// memory tier under `MemoryCache.Policy.adaptive`, the entry that lost the admission contest
    /// (a newcomer leaving the window that the frequency sketch rates no more popular than the
    /// main-area entry it would displace, or that main-area entry).
    case count
    /// Evicted to keep the tier within its cost limit, as ``count`` (an entry costlier than a
    /// memory shard's share of the limit goes at once, and under `.adaptive` a newcomer that would
    /// need several main-area entries' room must beat each of them).
    case cost
    /// Not read or written for longer than the tier's age limit.
    case age
    /// Evicted to keep the volume's free space above the disk tier's free-space limit.
    case freeSpace

    /// Index into fixed per-reason counters.
    @inlinable
    var index: Int {
        switch self {
        case .explicit: 0
        case .replaced: 1
        case .expired: 2
        case .count: 3
        case .cost: 4
        case .age: 5
        case .freeSpace: 6
        }
    }
}

/// The tier of a two-tier cache an event happened in.
public enum CacheTier: String, Sendable, CaseIterable, Hashable {
    /// The in-memory LRU (``MemoryCache``).
    case memory
    /// The LMDB store (``DiskCache``).
    case disk
}

/// An entry that left a cache, as a removal listener sees it.
public struct CacheRemoval<Key: Sendable, Value: Sendable>: Sendable {
    /// The entry's key.
    public var key: Key
    /// The value removed, when the tier had it decoded (always in memory; never for disk
    /// evictions, which do not read values).
    public var value: Value?
    /// Why the entry left.
    public var reason: RemovalReason
    /// The tier it left.
    public var tier: CacheTier

    /// A removal event.
    public init(key: Key, value: Value?, reason: RemovalReason, tier: CacheTier) {
        self.key = key
        self.value = value
        self.reason = reason
        self.tier = tier
    }
}
