import LMDBCache

/// The library's memory tier: `MemoryCache<String, [UInt8]>`, lock-striped LRU shards.
final class LMDBCacheSystem: MemorySystem {
    static let name = "LMDBCache"
    static let summary = "MemoryCache<String, [UInt8]> from this package (sharded LRU), countLimit = entries"

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
