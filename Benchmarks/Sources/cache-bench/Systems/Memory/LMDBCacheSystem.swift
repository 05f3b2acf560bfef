import LMDBCache

/// Which `MemoryCache.Policy` an ``LMDBCacheMemorySystem`` runs, with its name in the report.
protocol LMDBCachePolicyChoice: Sendable {
    static var name: String { get }
    static var summary: String { get }
    static var policy: MemoryCache<String, [UInt8]>.Policy { get }
}

/// The default policy, `.adaptive`.
enum AdaptivePolicyChoice: LMDBCachePolicyChoice {
    static var name: String { "LMDBCache" }
    static var summary: String {
        "MemoryCache<String, [UInt8]> from this package (sharded, default policy .adaptive), countLimit = entries"
    }
    static var policy: MemoryCache<String, [UInt8]>.Policy { .adaptive }
}

/// `.lru`, to compare the adaptive policy's cost with LRU's.
enum LRUPolicyChoice: LMDBCachePolicyChoice {
    static var name: String { "LMDBCache (lru)" }
    static var summary: String { "MemoryCache<String, [UInt8]> with policy .lru, countLimit = entries" }
    static var policy: MemoryCache<String, [UInt8]>.Policy { .lru }
}

/// The library's memory tier: `MemoryCache<String, [UInt8]>`, lock-striped shards, under the
/// policy `Choice` names.
final class LMDBCacheMemorySystem<Choice: LMDBCachePolicyChoice>: MemorySystem {
    static var name: String { Choice.name }
    static var summary: String { Choice.summary }

    private let cache: MemoryCache<String, [UInt8]>

    init(capacity: Int) {
        cache = MemoryCache(configuration: .init(countLimit: capacity, policy: Choice.policy))
    }

    static func makeKey(_ key: String) -> String { key }

    @inline(__always)
    func get(_ key: String) -> [UInt8]? { cache[key] }

    @inline(__always)
    func set(_ value: [UInt8], forKey key: String) { cache.insert(value, forKey: key) }

    var count: Int? { cache.totalCount }
}

typealias LMDBCacheSystem = LMDBCacheMemorySystem<AdaptivePolicyChoice>
typealias LMDBCacheLRUSystem = LMDBCacheMemorySystem<LRUPolicyChoice>
