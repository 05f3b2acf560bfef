import LMDBCache

/// The library's memory tier: `MemoryCache<String, [UInt8]>`, lock-striped shards, default policy
/// (`.adaptive`).
final class LMDBCacheSystem: MemorySystem {
    static let name = "LMDBCache"
    static let summary =
        "MemoryCache<String, [UInt8]> from this package (sharded, default policy .adaptive), countLimit = entries"

    private let cache: MemoryCache<String, [UInt8]>

    init(capacity: Int) {
        cache = MemoryCache(configuration: .init(countLimit: capacity))
    }

    static func makeKey(_ key: String) -> String { key }

    @inline(__always)
    func get(_ key: String) -> [UInt8]? { cache[key] }

    @inline(__always)
    func set(_ value: [UInt8], forKey key: String) { cache.insert(value, forKey: key) }

    var count: Int? { cache.totalCount }
}

/// The same memory tier with `policy: .lru`, to compare the adaptive policy's cost with LRU's.
final class LMDBCacheLRUSystem: MemorySystem {
    static let name = "LMDBCache (lru)"
    static let summary = "MemoryCache<String, [UInt8]> with policy .lru, countLimit = entries"

    private let cache: MemoryCache<String, [UInt8]>

    init(capacity: Int) {
        cache = MemoryCache(configuration: .init(countLimit: capacity, policy: .lru))
    }

    static func makeKey(_ key: String) -> String { key }

    @inline(__always)
    func get(_ key: String) -> [UInt8]? { cache[key] }

    @inline(__always)
    func set(_ value: [UInt8], forKey key: String) { cache.insert(value, forKey: key) }

    var count: Int? { cache.totalCount }
}
