import Foundation
import LMDBCache

/// The library's disk tier: `DiskCache` with its default configuration (writes queued and
/// committed in batches by its writer thread, zlib above 512 bytes), or `.synchronous`
/// durability (a write returns once committed and synced).
final class DiskCacheStore: DiskSystem {
    let name = "LMDBCache"
    private let cache: DiskCache

    init(directory: String, durability: DiskDurability) throws {
        var configuration = DiskCache.Configuration()
        if durability == .synchronous { configuration.durability = .synchronous }
        cache = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? { try cache.data(forKey: key) }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws { try cache.setData(value, forKey: key) }

    func finishWrites() throws { try cache.flush() }

    func close() { cache.close() }
}
