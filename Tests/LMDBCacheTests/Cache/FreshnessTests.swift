import Foundation
import Testing

@testable import LMDBCache

/// `Freshness` and `LoadContext`: every rule with an injected clock (the cache's time) and an
/// injected timeout clock, and loaders that wait on a gate the test opens. No sleeps.
@Suite("Freshness: refresh ahead, stale on failure, timeouts, loader context")
struct FreshnessTests {
    typealias GatedLoader = GetOrLoadTests.GatedLoader

    struct Failure: Error, Equatable {}

    /// A two-tier cache (or a memory-only one, for a nil `dir`) on `clock`, its timeouts on
    /// `timeouts`, trimming only when told: the caches of every loading suite.
    static func open(
        _ dir: TemporaryDirectory?, clock: ManualClock, timeouts: ManualTimeoutClock = ManualTimeoutClock(),
        freshness: Freshness = Freshness(), codec: GatedStringCodec? = nil,
        removalListener: Cache<String, String>.RemovalListener? = nil
    ) throws -> Cache<String, String> {
        guard let dir else {
            var memory = MemoryCache<String, String>.Configuration()
            memory.clock = clock.clock
            memory.automaticTrimming = false
            return Cache<String, String>(memory: memory, removalListener: removalListener)
        }
        var configuration =
            codec.map { Cache<String, String>.Configuration(codec: $0) } ?? Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.disk.accessTimeGranularity = .zero
        configuration.timeoutClock = timeouts
        configuration.freshness = freshness
        return try Cache(directory: dir.url, configuration: configuration, removalListener: removalListener)
    }

    static func waitUntil(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await GetOrLoadTests.waitUntil(condition, sourceLocation: sourceLocation)
    }

    // MARK: refreshAfter

    @Test(
        "refreshAfter: an old value is returned at once, reloaded in the background, then replaced",
        arguments: [true, false])
    func refreshReturnsOldThenReplaces(twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        #expect(try await cache.value(forKey: "k", freshness: freshness) { "v1" } == "v1")

        clock.advance(by: .seconds(59))
        let early = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await early.load { _ in "early" } } == "v1")
        #expect(early.count == 0, "not yet due")

        clock.advance(by: .seconds(1))
        #expect(cache["k"] == "v1", "a plain lookup never reloads")
        let reload = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await reload.load { _ in "v2" } } == "v1")
        await Self.waitUntil { reload.count == 1 }
        // A second due call while the reload runs joins it: no second loader run.
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await reload.load { _ in "v3" } } == "v1")
        reload.open()
        await Self.waitUntil { cache.statistics.refreshes == 1 }
        #expect(reload.count == 1)
        #expect(cache["k"] == "v2")
        #expect(cache.statistics.loads == 2)
        if let disk = cache.disk {
            try cache.flush()
            #expect(try disk.data(forKey: "k") == Array("v2".utf8))
        }
    }

    @Test("refreshAfter: a failed reload keeps the old value and is counted")
    func failedRefreshKeepsOld() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        _ = try await cache.value(forKey: "k", freshness: freshness) { "v1" }
        clock.advance(by: .seconds(61))
        let reload = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) {
                try await reload.load { _ in throw Failure() }
            } == "v1")
        reload.open()
        await Self.waitUntil { cache.statistics.refreshFailures == 1 }
        #expect(cache["k"] == "v1")
        #expect(cache.statistics.refreshes == 0)
        #expect(cache.statistics.loadFailures == 1)
    }

    @Test("refreshAfter is measured from the write, also for a value read back from disk after a reopen")
    func refreshAfterReopen() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let freshness = Freshness(refreshAfter: .seconds(60))
        do {
            let cache = try Self.open(dir, clock: clock)
            _ = try await cache.value(forKey: "k", freshness: freshness) { "v1" }
            cache.close()
        }
        clock.advance(by: .seconds(61))
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let reload = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await reload.load { _ in "v2" } } == "v1")
        reload.open()
        await Self.waitUntil { cache.statistics.refreshes == 1 }
        #expect(cache["k"] == "v2")
    }

    // MARK: staleIfError

    @Test(
        "staleIfError: past its expiry a value is hidden from plain lookups, served when the loader throws, gone past the window",
        arguments: [true, false])
    func staleIfError(twoTier: Bool) async throws {
        let dir = twoTier ? TemporaryDirectory() : nil
        defer { dir?.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100))
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v1" }
        try cache.flush()

        clock.advance(by: .seconds(10))
        #expect(cache["k"] == nil)
        #expect(!cache.contains("k"))
        #expect(cache.memory["k"] == nil)
        #expect(cache.values(forKeys: ["k"]).isEmpty)
        #expect(cache.metadata(forKey: "k") == nil)
        if let disk = cache.disk {
            #expect(try disk.data(forKey: "k") == nil)
            #expect(try !disk.containsData(forKey: "k"))
        }
        #expect(try await cache.value(forKey: "k", freshness: freshness) { throw Failure() } == "v1")
        #expect(cache.statistics.staleServedOnError == 1)
        // Without staleIfError on the call, the error is the caller's.
        await #expect(throws: Failure.self) { try await cache.value(forKey: "k") { throw Failure() } }

        clock.advance(by: .seconds(99))
        #expect(try await cache.value(forKey: "k", freshness: freshness) { throw Failure() } == "v1")
        cache.removeExpired()
        #expect(cache.memory.totalCount == 1, "kept until the window ends")
        if let disk = cache.disk { #expect(disk.totalCount == 1) }

        clock.advance(by: .seconds(1))
        await #expect(throws: Failure.self) {
            try await cache.value(forKey: "k", freshness: freshness) { throw Failure() }
        }
        cache.removeExpired()
        #expect(cache.memory.totalCount == 0)
        if let disk = cache.disk { #expect(disk.totalCount == 0) }
    }

    @Test("staleIfError: a successful load replaces the stale value; a reopened cache still serves it stale")
    func staleAcrossReopen() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let freshness = Freshness(staleIfError: .seconds(100))
        do {
            let cache = try Self.open(dir, clock: clock)
            _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v1" }
            cache.close()
        }
        clock.advance(by: .seconds(50))
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        #expect(cache["k"] == nil)
        #expect(try await cache.value(forKey: "k", freshness: freshness) { throw Failure() } == "v1")
        #expect(try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v2" } == "v2")
        #expect(cache["k"] == "v2")
    }

    // MARK: Timeouts

    @Test("timeout: a slow loader's caller gets the stale value; the load completes in the background and is stored")
    func softTimeoutServesStale() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache = try Self.open(dir, clock: clock, timeouts: timeouts)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100), timeout: .milliseconds(250))
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v1" }
        clock.advance(by: .seconds(20))
        let slow = GatedLoader()
        async let served = cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in "v2" } }
        await Self.waitUntil { slow.count == 1 && timeouts.sleeperCount == 1 }
        timeouts.advance(by: .milliseconds(250))
        #expect(try await served == "v1")
        #expect(cache.statistics.staleServedOnTimeout == 1)
        #expect(cache["k"] == nil, "the loader is still blocked")
        slow.open()
        await Self.waitUntil { cache.loads.isLoading("k") == false }
        #expect(cache["k"] == "v2")
    }

    @Test("timeout without a stale value: the caller waits for the loader")
    func softTimeoutWithoutStaleWaits() async throws {
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir, clock: clock, timeouts: timeouts)
        defer { cache.close() }
        let slow = GatedLoader()
        let freshness = Freshness(timeout: .milliseconds(250))
        async let loaded = cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in "v" } }
        await Self.waitUntil { slow.count == 1 }
        #expect(timeouts.sleeperCount == 0, "no soft timeout without a stale value")
        slow.open()
        #expect(try await loaded == "v")
    }

    @Test("hardTimeout: the wait ends with loadTimedOut while the loader is blocked; its result is stored later")
    func hardTimeoutThrows() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache = try Self.open(dir, clock: clock, timeouts: timeouts)
        defer { cache.close() }
        let slow = GatedLoader()
        let freshness = Freshness(hardTimeout: .seconds(5))
        let waiting = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in "v" } }
        }
        await Self.waitUntil { slow.count == 1 && timeouts.sleeperCount == 1 }
        timeouts.advance(by: .seconds(5))
        await #expect(throws: CacheError.loadTimedOut(key: "k", after: .seconds(5))) { try await waiting.value }
        #expect(cache.statistics.loadTimeouts == 1)
        #expect(cache["k"] == nil)
        slow.open()
        await Self.waitUntil { cache.loads.isLoading("k") == false }
        #expect(cache["k"] == "v")
        #expect(
            CacheError.loadTimedOut(key: "k", after: .seconds(5)).description
                == "loading key k took longer than 5.0 seconds; the load goes on in the background")
    }

    @Test("hardTimeout with a stale value serves it; timeouts in the configuration apply to calls that pass none")
    func hardTimeoutServesStale() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache = try Self.open(
            dir, clock: clock, timeouts: timeouts,
            freshness: Freshness(staleIfError: .seconds(100), hardTimeout: .seconds(5)))
        defer { cache.close() }
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10)) { "v1" }
        clock.advance(by: .seconds(20))
        let slow = GatedLoader()
        async let served = cache.value(forKey: "k") { try await slow.load { _ in "v2" } }
        await Self.waitUntil { slow.count == 1 && timeouts.sleeperCount == 1 }
        timeouts.advance(by: .seconds(5))
        #expect(try await served == "v1")
        #expect(cache.statistics.staleServedOnTimeout == 1)
        slow.open()
        await Self.waitUntil { cache.loads.isLoading("k") == false }
        #expect(cache["k"] == "v2")
    }

    @Test("a cancelled waiter with timeouts fails no one else, and the load is stored")
    func cancellationWithTimeouts() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache = try Self.open(dir, clock: clock, timeouts: timeouts)
        defer { cache.close() }
        let slow = GatedLoader()
        let freshness = Freshness(hardTimeout: .seconds(5))
        let cancelled = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in "v" } }
        }
        // The same value from both loaders: either task may claim the load first.
        let other = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in "v" } }
        }
        await Self.waitUntil { cache.loads.waiterCount(forKey: "k") == 2 && timeouts.sleeperCount == 2 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        slow.open()
        #expect(try await other.value == "v")
        #expect(slow.count == 1)
        #expect(cache["k"] == "v")
        #expect(timeouts.sleeperCount == 0)
    }

    // MARK: LoadContext

    @Test("isCacheable = false: every waiter gets the value, nothing is stored, the old value stays")
    func notCacheable() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let gate = AsyncGate()
        let load: @Sendable (LoadContext) async throws -> String = { context in
            await gate.wait()
            context.isCacheable = false
            return "once"
        }
        async let first = cache.value(forKey: "k", load: load)
        async let second = cache.value(forKey: "k", load: load)
        await Self.waitUntil { cache.loads.waiterCount(forKey: "k") == 2 }
        gate.open()
        #expect(try await [first, second] == ["once", "once"])
        #expect(cache["k"] == nil)
        try cache.flush()
        #expect(cache.disk?.totalCount == 0)

        cache["kept"] = "old"
        let reloaded = try await cache.value(forKey: "kept", policy: .reloadIgnoringCache) { context in
            context.isCacheable = false
            return "new"
        }
        #expect(reloaded == "new")
        #expect(cache["kept"] == "old")
    }

    @Test("a loader-set expiry and cost hold in both tiers and after a reopen")
    func loaderSetsLifetime() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        do {
            let cache = try Self.open(dir, clock: clock)
            let value = try await cache.value(forKey: "token", expiresAfter: .seconds(3_600)) { context in
                #expect(context.expiresAfter == .seconds(3_600), "starts with the call's")
                context.expiresAfter = .seconds(30)
                context.cost = 7
                return "t"
            }
            #expect(value == "t")
            #expect(cache.memory.totalCost == 7)
            let metadata = try #require(cache.metadata(forKey: "token"))
            #expect(metadata.expiresAt == metadata.storedAt.addingTimeInterval(30))
            cache.close()
        }
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let metadata = try #require(cache.metadata(forKey: "token"), "read from disk")
        #expect(metadata.expiresAt == metadata.storedAt.addingTimeInterval(30))
        #expect(cache["token"] == "t")
        clock.advance(by: .seconds(30))
        #expect(cache["token"] == nil)
        #expect(cache.memory["token"] == nil)
        #expect(try cache.disk?.data(forKey: "token") == nil)
    }

    // MARK: Lookups without loading

    @Test("metadata and values(forKeys:) count nothing and move nothing; metadata says when a value was stored")
    func lookupsWithoutLoading() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let start = clock.clock.now
        cache.insert("a", forKey: "a", expiresAfter: .seconds(60))
        cache.insert("b", forKey: "b")
        let before = cache.statistics
        let a = try #require(cache.metadata(forKey: "a"))
        #expect(a.storedAt == start)
        #expect(a.expiresAt == start.addingTimeInterval(60))
        #expect(cache.metadata(forKey: "b")?.expiresAt == nil)
        #expect(cache.metadata(forKey: "missing") == nil)
        #expect(cache.statistics == before)
        #expect(cache.values(forKeys: ["a", "b", "missing", "a"]) == ["a": "a", "b": "b"])
        cache.memory.removeAll()
        try cache.flush()
        clock.advance(by: .seconds(5))
        let fromDisk = try #require(cache.metadata(forKey: "a"))
        #expect(fromDisk.storedAt == start)
        #expect(cache.memory.totalCount == 0, "not promoted")
    }
}
