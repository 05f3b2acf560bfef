import Foundation
import LMDBCache

/// LMDBCache as a service links it: a `Cache` whose memory tier holds decoded values in front of
/// the disk tier, given the memory RocksDB's block cache has here (its cost: the value's bytes).
/// RocksDB keeps warm blocks uncompressed in that cache; this is LMDBCache's equivalent, where
/// ``DiskCacheStore`` inflates on every get.
final class TieredCacheStore: DiskSystem {
    let name = "LMDBCache"
    let variant: String? = "tiered"
    let durability = WriteDurability.perBatch
    let directory: String?
    private let cache: Cache<String, [UInt8]>

    init(directory: String) throws {
        let memory = MemoryCache<String, [UInt8]>.Configuration(costLimit: RocksDBStore.blockCacheBytes)
        self.directory = directory
        cache = try Cache(
            directory: URL(fileURLWithPath: directory), configuration: .init(memory: memory, disk: .init()))
    }

    var compression: String { "DEFLATE 1 (libdeflate), 512 B and up" }

    func get(_ key: [UInt8]) throws -> [UInt8]? { cache.value(forKey: String(decoding: key, as: UTF8.self)) }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        cache.insert(value, forKey: String(decoding: key, as: UTF8.self))
    }

    func finishWrites() throws { try cache.flush() }

    func drain() throws { try cache.flush() }

    func close() { cache.close() }

    /// `Cache` is thread-safe: the same handle.
    func concurrentWriter() throws -> any DiskSystem { self }
}
