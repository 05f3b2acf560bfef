import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Tags in the two-tier ``Cache``: `insert(_:forKey:cost:expiresAfter:tags:)`, loaders' `context.tags`,
/// promotion from disk with the tags, `removeAll(taggedWith:)` in both tiers, invalid tags, and
/// a memory-only cache.
@Suite("Cache: tags")
struct CacheTagTests {
    typealias StringCache = Cache<String, String>

    /// A cache whose follower only runs when the test calls `followChanges()`.
    static func open(
        _ dir: TemporaryDirectory, log: RemovalLog<String, String>? = nil,
        _ edit: (inout StringCache.Configuration) -> Void = { _ in }
    ) throws -> StringCache {
        var configuration = StringCache.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.coherence = .init(pollInterval: .seconds(3_600))
        edit(&configuration)
        return try Cache(directory: dir.url, configuration: configuration, removalListener: log?.listener)
    }

    static func isInvalidTag(_ error: (any Error)?) -> Bool {
        if case CacheError.invalidTag? = error as? CacheError { return true }
        return false
    }

    static func onDisk(_ cache: StringCache, _ key: String) throws -> String? {
        try cache.disk!.data(forKey: key).map { String(decoding: $0, as: UTF8.self) }
    }

    static func tags(_ strings: String...) -> EntryTags { try! EntryTags(strings) }

    @Test("removeAll(taggedWith:) removes the tag's entries from both tiers: memory only, disk only, or both")
    func bothTiers() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let log = RemovalLog<String, String>()
        let cache = try Self.open(dir, log: log)
        defer { cache.close() }
        let long = String(repeating: "l", count: 800)
        cache.insert("1", forKey: "a1", tags: ["author:42", "feed"])
        cache.insert("2", forKey: "a2", tags: ["feed"])
        cache.insert("3", forKey: "a3", tags: ["author:42"])
        cache.insert("4", forKey: "a4")
        cache.insert("L", forKey: long, tags: ["author:42"])
        #expect(cache.memory.tags(forKey: "a1") == Self.tags("author:42", "feed"))
        #expect(cache.memory.tags(forKey: "a4") == EntryTags.none)
        try cache.flush()
        #expect(Set(try cache.disk!.storedKeys(taggedWith: "author:42")).count == 3)
        // On disk only: evicted from memory.
        cache.insert("5", forKey: "disk-only", tags: ["author:42"])
        try cache.flush()
        #expect(cache.memory.removeValue(forKey: "disk-only") == "5")
        // In memory only: its disk copy went behind the cache's back.
        cache.insert("6", forKey: "memory-only", tags: ["author:42"])
        try cache.disk!.removeData(forKey: "memory-only")
        try cache.flush()
        // Still queued: inserted after the last flush.
        cache.insert("7", forKey: "queued", tags: ["author:42"])
        log.clear()

        let removed = cache.removeAll(taggedWith: "author:42")
        #expect(removed == 5, "a1, a3, the long key, disk-only and queued from disk")
        for key in ["a1", "a3", long, "disk-only", "memory-only", "queued"] {
            #expect(cache.memory.value(forKey: key) == nil, "\(key.prefix(8)) in memory")
            #expect(try Self.onDisk(cache, key) == nil, "\(key.prefix(8)) on disk")
            #expect(cache.value(forKey: key) == nil, "\(key.prefix(8))")
        }
        #expect(cache.value(forKey: "a2") == "2")
        #expect(cache.value(forKey: "a4") == "4")
        #expect(cache.memory.tags(forKey: "a2") == Self.tags("feed"))
        cache.waitForEvictionEvents()
        let heard = log.all
        #expect(heard.allSatisfy { $0.reason == .explicit }, "\(heard.map(\.reason))")
        #expect(
            Set(heard.map(\.key)) == ["a1", "a3", long, "disk-only", "memory-only", "queued"],
            "the listener hears each removed key (the long one whole), and no other")
        #expect(
            Set(heard.filter { $0.tier == .disk }.map(\.key)) == ["a1", "a3", long, "disk-only", "queued"],
            "the disk tier's removals")
        #expect(cache.removeAll(taggedWith: "author:42") == 0)
        #expect(cache.removeAll(taggedWith: "feed") == 1)
        #expect(cache.value(forKey: "a2") == nil)
        try cache.flush()
        #expect(cache.disk!.totalCount == 1)
        #expect(try TagIndexAudit.problems(cache.disk!).isEmpty)
    }

    @Test("replacing an entry replaces its tags in both tiers; an untagged insert leaves it untagged")
    func replacement() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        cache.insert("1", forKey: "k", tags: ["a"])
        try cache.flush()
        cache.insert("2", forKey: "k", tags: ["b"])
        #expect(cache.memory.tags(forKey: "k") == Self.tags("b"))
        #expect(cache.removeAll(taggedWith: "a") == 0)
        #expect(cache.value(forKey: "k") == "2")
        #expect(try Self.onDisk(cache, "k") == "2")
        cache.insert("3", forKey: "k")
        #expect(cache.memory.tags(forKey: "k") == EntryTags.none)
        #expect(cache.removeAll(taggedWith: "b") == 0)
        #expect(cache.value(forKey: "k") == "3")
        #expect(try Self.onDisk(cache, "k") == "3")
        cache.memory.removeAll()
        #expect(cache.value(forKey: "k") == "3")
        #expect(cache.memory.tags(forKey: "k") == EntryTags.none, "promoted untagged")
    }

    @Test(
        "an invalid tag on insert stores nothing, removes the old value from both tiers (and other caches), and flush() throws invalidTag"
    )
    func invalidTagOnInsert() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        let other = try Self.open(dir)
        defer {
            cache.close()
            other.close()
        }
        let invalid: [(String, Set<String>)] = [
            ("an empty tag", ["ok", ""]),
            ("33 tags", Set((0..<33).map { "t\($0)" })),
            ("256 bytes", [String(repeating: "x", count: 256)]),
        ]
        for (name, tags) in invalid {
            cache.insert("old", forKey: "k", tags: ["keep"])
            try cache.flush()
            #expect(other.value(forKey: "k") == "old", "\(name): promoted in the other cache")
            let before = cache.disk!.totalCount
            cache.insert("new", forKey: "k", tags: tags)
            #expect(cache.value(forKey: "k") == nil, "\(name): neither tier serves the old or the new value")
            #expect(cache.memory.value(forKey: "k") == nil, "\(name)")
            #expect(try Self.onDisk(cache, "k") == nil, "\(name)")
            let error = #expect(throws: CacheError.self, "\(name)") { try cache.flush() }
            #expect(Self.isInvalidTag(error), "\(name): \(String(describing: error))")
            #expect(throws: Never.self, "\(name): reported once") { try cache.flush() }
            #expect(cache.disk!.totalCount == before - 1, "\(name): the old entry is gone from disk")
            #expect(cache.removeAll(taggedWith: "keep") == 0, "\(name)")
            other.followChanges()
            #expect(other.memory.value(forKey: "k") == nil, "\(name): the other cache dropped its copy")
            #expect(other.value(forKey: "k") == nil, "\(name)")
        }
        // No old value: nothing stored, and the failure reported.
        cache.insert("new", forKey: "fresh", tags: [""])
        #expect(cache.value(forKey: "fresh") == nil)
        #expect(Self.isInvalidTag(#expect(throws: CacheError.self) { try cache.flush() }))
    }

    @Test("a loader's context.tags are stored with its value in both tiers; invalid ones store nothing")
    func loaderTags() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let calls = Locked(0)
        @Sendable func load(_ context: LoadContext) -> String {
            let call = calls.withLock { count in
                count += 1
                return count
            }
            context.tags = ["loaded", "call\(call)"]
            return "v\(call)"
        }
        #expect(try await cache.value(forKey: "k", load: load) == "v1")
        #expect(cache.memory.tags(forKey: "k") == Self.tags("loaded", "call1"))
        try cache.flush()
        #expect(try cache.disk!.storedKeys(taggedWith: "call1") == ["k".cacheKeyBytes])
        #expect(try await cache.value(forKey: "k", load: load) == "v1", "cached")
        #expect(cache.removeAll(taggedWith: "loaded") == 1)
        #expect(cache.value(forKey: "k") == nil)
        #expect(try await cache.value(forKey: "k", load: load) == "v2", "loaded again after the removal")
        cache.memory.removeAll()
        #expect(cache.value(forKey: "k") == "v2")
        #expect(cache.memory.tags(forKey: "k") == Self.tags("loaded", "call2"), "promoted with the loader's tags")

        // A reload whose loader sets an invalid tag: the caller gets the value, nothing is stored
        // (the old value stays, as when a loader says `isCacheable = false`), flush() reports it.
        let value = try await cache.value(forKey: "k", policy: .reloadIgnoringCache) { context in
            context.tags = ["fine", String(repeating: "x", count: 300)]
            return "invalid"
        }
        #expect(value == "invalid")
        #expect(cache.value(forKey: "k") == "v2")
        #expect(try Self.onDisk(cache, "k") == "v2")
        #expect(Self.isInvalidTag(#expect(throws: CacheError.self) { try cache.flush() }))
    }

    @Test("a value promoted from disk brings its tags: committed, after a reopen, and still queued")
    func promotionBringsTags() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var cache = try Self.open(dir)
        cache.insert("1", forKey: "k", tags: ["a", "caf\u{E9}"])
        try cache.flush()
        cache.memory.removeAll()
        #expect(cache.value(forKey: "k") == "1")
        #expect(cache.memory.tags(forKey: "k") == Self.tags("a", "cafe\u{301}"))
        cache.close()

        cache = try Self.open(dir)
        defer { cache.close() }
        #expect(cache.memory.value(forKey: "k") == nil)
        #expect(cache.value(forKey: "k") == "1")
        #expect(cache.memory.tags(forKey: "k") == Self.tags("a", "caf\u{E9}"), "after a reopen")
        #expect(cache.memory.removeAll(taggedWith: "cafe\u{301}") == 1, "the memory tier alone finds it by tag")
        #expect(cache.value(forKey: "k") == "1", "still on disk")

        // Queued: the writer is held, so the value is read from the write queue.
        try cache.disk!.store.env.writer.sync {
            cache.insert("2", forKey: "q", tags: ["queued"])
            cache.insert(String(repeating: "z", count: 5_000), forKey: "deferred", tags: ["queued", "big"])
            cache.memory.removeAll()
            #expect(cache.disk!.totalCount == 1)
            #expect(cache.value(forKey: "q") == "2")
            #expect(cache.value(forKey: "deferred")?.count == 5_000)
        }
        #expect(cache.memory.tags(forKey: "q") == Self.tags("queued"))
        #expect(cache.memory.tags(forKey: "deferred") == Self.tags("queued", "big"), "left to the writer to deflate")
        #expect(cache.removeAll(taggedWith: "queued") == 2)
        #expect(cache.value(forKey: "q") == nil && cache.value(forKey: "deferred") == nil)
    }

    @Test("a memory-only Cache supports tags: insert, replace, removeAll(taggedWith:), invalid tags, loaders")
    func memoryOnly() async throws {
        let cache = StringCache(memory: .init(countLimit: 100))
        defer { cache.close() }
        cache.insert("1", forKey: "a1", tags: ["author:42", "feed"])
        cache.insert("2", forKey: "a2", tags: ["feed"])
        cache.insert("3", forKey: "a3", tags: ["author:42"])
        #expect(cache.memory.tags(forKey: "a1") == Self.tags("author:42", "feed"))
        #expect(cache.removeAll(taggedWith: "author:42") == 2)
        #expect(cache["a1"] == nil && cache["a3"] == nil && cache["a2"] == "2")
        cache.insert("2b", forKey: "a2", tags: ["other"])
        #expect(cache.removeAll(taggedWith: "feed") == 0)
        #expect(cache["a2"] == "2b")
        cache.insert("bad", forKey: "a2", tags: [""])
        #expect(cache["a2"] == nil, "the old value does not outlive a failed write")
        #expect(Self.isInvalidTag(#expect(throws: CacheError.self) { try cache.flush() }))
        #expect(throws: Never.self) { try cache.flush() }
        let loaded = try await cache.value(forKey: "l") { context in
            context.tags = ["loaded"]
            return "L"
        }
        #expect(loaded == "L")
        #expect(cache.memory.tags(forKey: "l") == Self.tags("loaded"))
        #expect(cache.removeAll(taggedWith: "loaded") == 1)
        #expect(cache["l"] == nil)
        #expect(cache.removeAll(taggedWith: "") == 0, "an invalid tag matches nothing")
    }

    @Test("another cache on the directory drops the tag's entries once it follows the log")
    func otherCacheFollowsTagRemoval() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let a = try Self.open(dir)
        let b = try Self.open(dir)
        defer {
            a.close()
            b.close()
        }
        for index in 0..<50 {
            a.insert("v\(index)", forKey: "k\(index)", tags: index % 2 == 0 ? ["even"] : ["odd"])
        }
        try a.flush()
        b.followChanges()  // a's writes: nothing in b's memory yet
        for index in 0..<50 { #expect(b.value(forKey: "k\(index)") == "v\(index)") }
        b.followChanges()
        #expect(b.memory.totalCount == 50, "promoted after the writes were followed: nothing to drop")
        #expect(a.removeAll(taggedWith: "even") == 25)
        b.followChanges()
        for index in 0..<50 {
            #expect(b.memory.value(forKey: "k\(index)") == (index % 2 == 0 ? nil : "v\(index)"), "k\(index)")
            #expect(b.value(forKey: "k\(index)") == (index % 2 == 0 ? nil : "v\(index)"))
        }
        #expect(b.statistics.invalidationsApplied >= 25)
        #expect(b.statistics.memoryTierDrops == 0)
    }

    struct OriginDown: Error {}

    @Test("a value kept past its expiry for staleIfError is removed by its tag, and no longer served stale")
    func staleWindowRemovedByTag() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir) { $0.clock = clock.clock }
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(3_600))
        @Sendable func get(failing: Bool) async throws -> String {
            try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { context in
                if failing { throw OriginDown() }
                context.tags = ["t"]
                return "v1"
            }
        }
        #expect(try await get(failing: false) == "v1")
        cache.insert("other", forKey: "other", expiresAfter: .seconds(10), tags: ["t"])
        try cache.flush()
        clock.advance(by: .seconds(20))
        #expect(cache["k"] == nil, "expired for plain lookups")
        #expect(try await get(failing: true) == "v1", "served stale while the cache holds it")
        #expect(cache.removeAll(taggedWith: "t") == 2, "the stale record and the expired one, from disk")
        await #expect(throws: OriginDown.self, "removed: nothing stale to serve") { try await get(failing: true) }
        cache.memory.removeAll()
        await #expect(throws: OriginDown.self, "not from disk either") { try await get(failing: true) }
        try cache.flush()
        #expect(cache.disk!.totalCount == 0)
        #expect(try TagIndexAudit.problems(cache.disk!).isEmpty)
    }
}
