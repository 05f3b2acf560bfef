import Foundation
import LMDBCache

/// The library's disk tier: `DiskCache` with its default configuration (writes queued and
/// committed in batches by its writer thread, each commit with one `fdatasync`; DEFLATE level 1
/// through libdeflate for values of 512 bytes and up, by the writer thread when the queue has room), in `.periodic` durability (commits without sync, one sync a
/// minute and on `flush()`), or `.synchronous` (a write returns once committed and synced).
final class DiskCacheStore: DiskSystem {
    /// The durability modes the suite runs it in.
    enum Mode {
        case batched, periodic, synchronous
    }

    let name = "LMDBCache"
    let directory: String?
    let durability: WriteDurability
    let variant: String?
    private let cache: DiskCache

    init(directory: String, mode: Mode) throws {
        var configuration = DiskCache.Configuration()
        switch mode {
        case .batched:
            durability = .perBatch
            variant = nil
        case .periodic:
            // Longer than any run, so within a run only the final flush syncs.
            configuration.durability = .periodic(syncInterval: .seconds(60))
            durability = .atEnd
            variant = "periodic"
        case .synchronous:
            configuration.durability = .synchronous
            durability = .onReturn
            variant = nil
        }
        self.directory = directory
        cache = try DiskCache(directory: URL(fileURLWithPath: directory), configuration: configuration)
    }

    var compression: String { "DEFLATE 1 (libdeflate), 512 B and up" }

    func get(_ key: [UInt8]) throws -> [UInt8]? { try cache.data(forKey: key) }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws { try cache.setData(value, forKey: key) }

    func finishWrites() throws { try cache.flush() }

    /// `flush()` also has the writer commit the access times reads have buffered.
    func drain() throws { try cache.flush() }

    func close() { cache.close() }

    /// `DiskCache` is thread-safe: the same handle.
    func concurrentWriter() throws -> any DiskSystem { self }
}
