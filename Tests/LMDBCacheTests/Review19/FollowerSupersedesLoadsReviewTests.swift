import Foundation
import Testing

@testable import LMDBCache

/// Review of issue 19: the follower drops what another cache changed with
/// `MemoryCache.removeValue(forKey:)` (Cache.swift, `followerTarget`), which does not supersede
/// this cache's load of the key under way (`loads.supersede(key)`, as `Cache.insert` and
/// `removeValue` do). A load that started before another cache's write therefore stores its
/// older value after it, in both tiers: on disk it overwrites the other cache's newer write,
/// and every cache on the directory then serves the older value. Within one cache the same
/// interleaving is refused (`fromLoad` and `isSuperseded`); across caches the follower knew of
/// the write before the load stored, and could refuse it the same way.
@Suite("Review 19: another cache's write and a load under way")
struct FollowerSupersedesLoadsReviewTests {
    @Test("a load that started before another cache's followed write does not overwrite it")
    func followedWriteSupersedesLoad() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let a = try CacheTagTests.open(dir)
        let b = try CacheTagTests.open(dir)
        defer {
            a.close()
            b.close()
        }
        let (started, startedContinuation) = AsyncStream.makeStream(of: Void.self)
        let (release, releaseContinuation) = AsyncStream.makeStream(of: Void.self)
        let load = Task {
            try await b.value(forKey: "k") { _ in
                startedContinuation.yield()
                for await _ in release { break }
                return "v1 (read from the source before v2)"
            }
        }
        for await _ in started { break }
        a.insert("v2", forKey: "k")
        try a.flush()
        b.followChanges()
        releaseContinuation.yield()
        _ = try await load.value
        try b.flush()
        a.followChanges()
        #expect(b.value(forKey: "k") == "v2", "B stored its older load over A's newer write")
        #expect(a.value(forKey: "k") == "v2")
        #expect(try CacheTagTests.onDisk(a, "k") == "v2")
    }
}
