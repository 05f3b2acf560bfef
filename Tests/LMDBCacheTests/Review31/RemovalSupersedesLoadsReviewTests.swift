import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Review of issue 31, removals and the loads under way: one rule, "any removal that covers a
/// key (by key, by tag, all) supersedes the loads of that key that began before it", in this
/// process and through the change log in the others; and a removal that covers nothing leaves
/// every other load alone. Also: a tag removal or a removal of everything and a concurrent
/// insert leave the tiers agreeing; an empty tag is one behaviour for every cache; a full ring of
/// refused promotions still refuses.
@Suite("Review 31: removals supersede the loads they cover, and only those")
struct RemovalSupersedesLoadsReviewTests {
    typealias GatedLoader = GetOrLoadTests.GatedLoader

    static func waitUntil(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await GetOrLoadTests.waitUntil(condition, sourceLocation: sourceLocation)
    }

    /// Where the removal is made: by this cache, or by another cache on the same directory whose
    /// change this one then follows.
    enum Remover: String, CaseIterable, Sendable {
        case here, anotherProcess
    }

    /// A two-tier cache and a second one on its directory (the other process), or a memory-only
    /// one (`twoTier` false; no other process then).
    static func caches(
        _ dir: TemporaryDirectory?, clock: ManualClock
    ) throws -> (cache: Cache<String, String>, other: Cache<String, String>?) {
        let cache = try FreshnessTests.open(dir, clock: clock)
        guard dir != nil else { return (cache, nil) }
        return (cache, try FreshnessTests.open(dir, clock: clock))
    }

    /// Removes `tag` through `remover` and, for another process, has `cache` follow it.
    static func removeTag(
        _ tag: String, _ remover: Remover, cache: Cache<String, String>, other: Cache<String, String>?
    ) {
        switch remover {
        case .here:
            cache.removeAll(taggedWith: tag)
        case .anotherProcess:
            other!.removeAll(taggedWith: tag)
            cache.followChanges()
        }
    }

    /// Whether either tier of `cache` holds `key` (the disk after a flush).
    static func held(_ cache: Cache<String, String>, _ key: String) throws -> Bool {
        if cache.memory.contains(key) { return true }
        guard let disk = cache.disk else { return false }
        try cache.flush()
        return try disk.data(forKey: key) != nil
    }

    static let cases: [(Remover, Bool)] = [(.here, true), (.here, false), (.anotherProcess, true)]

    // MARK: 2. A tag removal stops the loads it covers

    @Test("a refresh under way when its key's tag is removed does not store its value", arguments: cases)
    func tagRemovalSupersedesRefresh(remover: Remover, twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let clock = ManualClock()
        let (cache, other) = try Self.caches(dir, clock: clock)
        defer {
            cache.close()
            other?.close()
        }
        cache.insert("old", forKey: "k", tags: ["t"])
        try cache.flush()
        clock.advance(by: .seconds(61))
        let reload = GatedLoader()
        let freshness = Freshness(refreshAfter: .seconds(60))
        // The refresh read its source before the removal; its value carries the same tag.
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { context in
                try await reload.load { _ in
                    context.tags = ["t"]
                    return "refreshed before the removal"
                }
            } == "old")
        await Self.waitUntil { reload.count == 1 }
        Self.removeTag("t", remover, cache: cache, other: other)
        reload.open()
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == nil, "the removed entry came back from a refresh that began before the removal")
        #expect(try !Self.held(cache, "k"))
        #expect(cache.statistics.refreshes == 0)
    }

    @Test("a tag removal keeps out a value a load under way returns carrying that tag", arguments: cases)
    func tagRemovalSupersedesLoadCarryingTag(remover: Remover, twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let (cache, other) = try Self.caches(dir, clock: ManualClock())
        defer {
            cache.close()
            other?.close()
        }
        let loader = GatedLoader()
        let load = Task {
            try await cache.value(forKey: "new") { context in
                try await loader.load { _ in
                    context.tags = ["t", "u"]
                    return "read before the removal"
                }
            }
        }
        await Self.waitUntil { loader.count == 1 }
        Self.removeTag("t", remover, cache: cache, other: other)
        loader.open()
        #expect(try await load.value == "read before the removal", "its callers still get it")
        #expect(cache["new"] == nil)
        #expect(try !Self.held(cache, "new"))
    }

    @Test("a bulk load under way when its keys' tag is removed does not store its values", arguments: cases)
    func tagRemovalSupersedesBulkLoad(remover: Remover, twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let (cache, other) = try Self.caches(dir, clock: ManualClock())
        defer {
            cache.close()
            other?.close()
        }
        let loader = GatedLoader()
        let load = Task {
            try await cache.values(forKeys: ["a", "b"], tags: ["t"]) { keys in
                _ = try await loader.load { _ in "" }
                return Dictionary(uniqueKeysWithValues: keys.map { ($0, "bulk \($0)") })
            }
        }
        await Self.waitUntil { loader.count == 1 }
        Self.removeTag("t", remover, cache: cache, other: other)
        loader.open()
        #expect(try await load.value == ["a": "bulk a", "b": "bulk b"])
        #expect(cache["a"] == nil && cache["b"] == nil)
        #expect(try !Self.held(cache, "a") && !Self.held(cache, "b"))
    }

    // MARK: 3. Only what the removal covers

    @Test("a tag removal leaves loads of keys it does not cover alone: their values are stored", arguments: cases)
    func tagRemovalLeavesOtherLoads(remover: Remover, twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let clock = ManualClock()
        let (cache, other) = try Self.caches(dir, clock: clock)
        defer {
            cache.close()
            other?.close()
        }
        cache.insert("old", forKey: "tagged other", tags: ["other"])
        cache.insert("kept", forKey: "t entry", tags: ["t"])
        try cache.flush()
        clock.advance(by: .seconds(61))
        let miss = GatedLoader()
        let refresh = GatedLoader()
        let load = Task { try await cache.value(forKey: "untagged") { try await miss.load { _ in "loaded" } } }
        _ = try await cache.value(forKey: "tagged other", freshness: Freshness(refreshAfter: .seconds(60))) { context in
            try await refresh.load { _ in
                context.tags = ["other"]
                return "refreshed"
            }
        }
        await Self.waitUntil { miss.count == 1 && refresh.count == 1 }
        Self.removeTag("t", remover, cache: cache, other: other)
        // A tag no entry carries, too.
        Self.removeTag("nobody", remover, cache: cache, other: other)
        miss.open()
        refresh.open()
        #expect(try await load.value == "loaded")
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["untagged"] == "loaded", "a load the removal did not cover was thrown away")
        #expect(cache["tagged other"] == "refreshed")
        #expect(cache["t entry"] == nil)
        #expect(cache.statistics.refreshes == 1)
    }

    // MARK: Also seen: tiers agree; an empty tag; the refusal ring

    @Test("inserts racing removals by tag and of everything leave both tiers agreeing on every key")
    func tiersAgreeUnderRemovals() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try CacheTagTests.open(dir)
        defer { cache.close() }
        let keys = (0..<16).map { "k\($0)" }
        for round in 0..<40 {
            DispatchQueue.concurrentPerform(iterations: 3) { worker in
                if worker == 2 {
                    for pass in 0..<8 {
                        if pass == 7 { cache.removeAll() } else { cache.removeAll(taggedWith: "t") }
                    }
                } else {
                    for (index, key) in keys.enumerated() where index % 2 == worker {
                        cache.insert("\(round).\(index)", forKey: key, tags: ["t"])
                    }
                }
            }
            try cache.flush()
            for key in keys {
                let inMemory = cache.memory.value(forKey: key)
                let onDisk = try CacheTagTests.onDisk(cache, key)
                #expect(
                    inMemory == nil || inMemory == onDisk,
                    "round \(round), \(key): memory \(inMemory ?? "nil"), disk \(onDisk ?? "nil")")
            }
        }
    }

    @Test(
        "removeAll(taggedWith: \"\") removes nothing and fails nothing, in every kind of cache",
        arguments: [true, false])
    func emptyTag(twoTier: Bool) throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        cache.insert("v", forKey: "k", tags: ["t"])
        #expect(cache.removeAll(taggedWith: "") == 0)
        #expect(cache["k"] == "v")
        try cache.flush()
        #expect(cache.statistics.failedWrites == 0)
    }

    @Test("a promotion that missed before a refusal the ring has forgotten is still refused; later ones land")
    func forgottenRefusalStillRefuses() {
        let cache = MemoryTagTests.cache(shards: 1)
        cache.insert(0, forKey: 100)  // moves the generation off its start
        let (_, before) = cache.lookUp(1)
        cache.insert(0, forKey: 101)
        // A reader of key 1 misses now, at the current generation...
        let (_, now) = cache.lookUp(1)
        // ...and a reader of key 1 that missed earlier is refused now (no entry to drop), then
        // more refusals than the ring holds, of other keys.
        cache.insert(1, forKey: 1, cost: nil, expires: 0, now: cache.now, ifGeneration: before)
        for key in 2..<(2 + MemoryShard<Int, Int>.refusalMemory) {
            cache.insert(key, forKey: key, cost: nil, expires: 0, now: cache.now, ifGeneration: before)
        }
        // The later miss read the disk no later than the refused one: refused too.
        cache.insert(1, forKey: 1, cost: nil, expires: 0, now: cache.now, ifGeneration: now)
        #expect(!cache.contains(1), "a promotion raced a refusal the ring forgot, and landed")
        // A miss after all that, racing nothing, promotes.
        for _ in 0..<10 {
            let (_, generation) = cache.lookUp(50)
            cache.insert(50, forKey: 50, cost: nil, expires: 0, now: cache.now, ifGeneration: generation)
        }
        #expect(cache.contains(50), "a promotion that raced nothing was refused")
    }

    @Test("a full refusal ring that forgot nothing does not refuse a later promotion")
    func fullRingForgettingNothing() {
        let cache = MemoryTagTests.cache(shards: 1)
        cache.insert(0, forKey: 100)
        let (_, before) = cache.lookUp(1)
        cache.insert(0, forKey: 101)
        for key in 1...MemoryShard<Int, Int>.refusalMemory {
            cache.insert(key, forKey: key, cost: nil, expires: 0, now: cache.now, ifGeneration: before)
        }
        let (_, generation) = cache.lookUp(50)
        cache.insert(50, forKey: 50, cost: nil, expires: 0, now: cache.now, ifGeneration: generation)
        #expect(cache.contains(50))
    }

    @Test("many removals of tags a load does not carry, during the load, leave its tagged value stored")
    func manyUnrelatedTagRemovals() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        let loader = GatedLoader()
        let call = Task {
            try await cache.value(forKey: "k") { context in
                context.tags = ["mine"]
                return try await loader.load { _ in "loaded" }
            }
        }
        await Self.waitUntil { loader.count == 1 }
        for index in 0..<100 { cache.removeAll(taggedWith: "other\(index)") }
        loader.open()
        #expect(try await call.value == "loaded")
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == "loaded", "no removal covered k or its tag")
    }

    @Test(
        "search: an insert racing a load's start, then a removal of the insert's tag: nothing the removal covers survives it"
    )
    func insertRacingLoadStart() async throws {
        let cache = try FreshnessTests.open(nil, clock: ManualClock())
        defer { cache.close() }
        var survivors: [String] = []
        // 2,000 rounds in the plain run; as many as the model tests' sequences under the
        // sanitizers (LMDBCACHE_MODEL_SEQUENCES), whose runs it would otherwise dominate.
        for round in 0..<min(2_000, ModelRun.sequences(default: 2_000)) {
            let key = "k\(round)"
            let gate = AsyncGate()
            let called = Locked(false)
            let inserted = Locked(false)
            DispatchQueue.global().async {
                cache.insert("W", forKey: key, tags: ["t"])
                inserted.withLock { $0 = true }
            }
            let load = Task {
                try await cache.value(forKey: key, policy: .reloadIgnoringCache) {
                    called.withLock { $0 = true }
                    await gate.wait()
                    return "L"
                }
            }
            await Self.waitUntil { called.withLock { $0 } && inserted.withLock { $0 } }
            cache.removeAll(taggedWith: "t")
            gate.open()
            _ = try await load.value
            if cache[key] != nil { survivors.append(key) }
        }
        #expect(survivors.isEmpty, "\(survivors.count) loads that began before the removal stored after it")
    }
}
