import Dispatch
import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// `close()` ends the cache for good: memory stays empty afterwards, and a removal listener may
/// close the cache it listens to.
@Suite("Two-tier cache: close")
struct CacheCloseTests {
    @Test("after close returns, memory is empty and stays empty, even for an insert that raced it")
    func insertRacingCloseLeavesMemoryEmpty() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let codec = GatedStringCodec(stoppingAt: .encode, for: "late")
        let cache = try Cache<String, String>(directory: dir.url, configuration: .init(codec: codec))
        let inserter = DispatchGroup()
        DispatchQueue.global().async(group: inserter) { cache["k"] = "late" }
        // The insert has passed its closed check and is encoding: close runs to the end now.
        codec.entered.wait()
        cache.close()
        codec.release.signal()
        inserter.wait()
        #expect(cache.memory.totalCount == 0)
        #expect(cache["k"] == nil)
        #expect(throws: CacheError.closed) { try cache.flush() }
    }

    @Test("a disk-eviction listener may close the cache it listens to")
    func listenerClosesCache() throws {
        final class Holder: Sendable {
            let cache = Locked<Cache<String, String>?>(nil)
            let closed = DispatchSemaphore(value: 0)
        }
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let holder = Holder()
        var configuration = Cache<String, String>.Configuration()
        configuration.disk.automaticTrimming = false
        let cache = try Cache<String, String>(
            directory: dir.url, configuration: configuration,
            removalListener: { [weak holder] removal in
                guard removal.tier == .disk, let holder, let cache = holder.cache.withLock({ $0 }) else { return }
                holder.cache.withLock { $0 = nil }
                cache.close()
                holder.closed.signal()
            })
        holder.cache.withLock { $0 = cache }
        for i in 0..<20 { cache["k\(i)"] = "v\(i)" }
        try cache.flush()
        cache.disk.map { disk in #expect(throws: Never.self) { try disk.trim(toCount: 0) } }
        holder.closed.wait()
        #expect(throws: CacheError.closed) { try cache.flush() }
        #expect(cache["k0"] == nil)
    }
}
