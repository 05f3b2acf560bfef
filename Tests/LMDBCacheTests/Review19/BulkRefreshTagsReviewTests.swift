import Foundation
import Testing

@testable import LMDBCache

/// Review of issue 19: bulk loads (Cache+BulkLoading.swift, `runBulk`) store with no tags and
/// their loader has no `LoadContext`, so a bulk loader cannot tag what it loads, and a
/// refreshAfter reload of a tagged entry through `values(forKeys:)` stores it untagged: the
/// entry silently leaves its tags, and `removeAll(taggedWith:)` (the invalidation the tag was
/// for) no longer removes its newer value. Fixed: `values(forKeys:tags:)` stores its loads, and
/// its refreshes, with the call's tags.
@Suite("Review 19: bulk refresh of tagged entries")
struct BulkRefreshTagsReviewTests {
    @Test("a bulk refresh with the call's tags leaves the entry removable by its tag")
    func bulkRefreshKeepsTheTag() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try BulkLoadTests.open(dir, clock: clock)
        defer { cache.close() }
        cache.insert("old", forKey: "a1", tags: ["author:42"])
        clock.advance(by: .seconds(60))
        let values = try await cache.values(
            forKeys: ["a1"], freshness: Freshness(refreshAfter: .seconds(60)), tags: ["author:42"]
        ) { keys in Dictionary(uniqueKeysWithValues: keys.map { ($0, "new") }) }
        #expect(values == ["a1": "old"])
        await GetOrLoadTests.waitUntil { cache.statistics.refreshes == 1 }
        #expect(cache.value(forKey: "a1") == "new")
        #expect(cache.memory.tags(forKey: "a1") == (try EntryTags(["author:42"])), "the refresh dropped the tag")
        #expect(cache.removeAll(taggedWith: "author:42") == 1)
        #expect(cache.value(forKey: "a1") == nil, "the tag's invalidation missed the refreshed value")
    }
}
