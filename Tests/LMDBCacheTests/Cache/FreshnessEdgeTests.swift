import Dispatch
import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Freshness at its edges: interleavings of timers, loads, refreshes and writes, windows that end
/// mid-load, counts, and extreme durations. Found by a review that read the change looking for
/// ways to break it; each of the first group failed against the first version.
@Suite("Freshness: races and edges")
struct FreshnessEdgeTests {
    typealias GatedLoader = GetOrLoadTests.GatedLoader

    struct Failure: Error, Equatable {}

    // MARK: Found broken, now fixed

    /// An executor that runs its jobs only when the test drains it, newest first: it forces the
    /// interleaving where a timer child and the caller run before the load child (on the global
    /// executor the same happens when two threads pick the children up at once and the load
    /// child is the slower to reach the coalescer's lock; a loop of 4,000 zero-timeout calls from
    /// 8 tasks hits it 1 to 4 times per run on this machine).
    final class LIFOExecutor: TaskExecutor, @unchecked Sendable {
        private let lock = NSLock()
        private var jobs: [UnownedJob] = []

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            lock.withLock { jobs.append(job) }
        }

        /// Runs jobs, newest first, until none is queued.
        func drain() {
            while let job = lock.withLock({ jobs.popLast() }) {
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
    }

    /// Runs `body` on a ``LIFOExecutor`` until it returns.
    static func runNewestFirst<T: Sendable>(
        _ body: @escaping @Sendable () async throws -> T
    ) async -> Result<T, any Error> {
        let executor = LIFOExecutor()
        let result = Locked<Result<T, any Error>?>(nil)
        Task(executorPreference: executor) {
            let outcome: Result<T, any Error>
            do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
            result.withLock { $0 = outcome }
        }
        while true {
            executor.drain()
            if let outcome = result.withLock({ $0 }) { return outcome }
            await Task.yield()
        }
    }

    /// the load is started by a child of the task group that races the timers
    /// (Cache+Loading.swift `wait`). When a timer wins before that child has joined the
    /// coalescer, `cancelAll()` reaches the child first, `LoadCoalescer.value` sees the
    /// cancellation and never starts the load: the caller gets `loadTimedOut` and nothing loads
    /// in the background, against "the load goes on in the background and its result is stored".
    @Test("a hard timeout that fires before the load child runs still leaves the load running")
    func hardTimeoutBeforeLoadChildStillLoads() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        let loader = GatedLoader()
        defer { loader.open() }
        let outcome = await Self.runNewestFirst {
            try await cache.value(forKey: "k", freshness: Freshness(hardTimeout: .zero)) {
                try await loader.load { _ in "v" }
            }
        }
        #expect(throws: CacheError.loadTimedOut(key: "k", after: .zero)) { try outcome.get() }
        #expect(cache.loads.isLoading("k") || loader.count == 1, "no load was started")
    }

    /// the same with a soft timeout and a stale value: the caller gets the stale value,
    /// no load runs, and the key stays stale (each later call the same) until its window ends.
    @Test("a soft timeout that fires before the load child runs still leaves the load running")
    func softTimeoutBeforeLoadChildStillLoads() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(1_000), timeout: .zero)
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "old" }
        clock.advance(by: .seconds(20))
        let loader = GatedLoader()
        defer { loader.open() }
        let outcome = await Self.runNewestFirst {
            try await cache.value(forKey: "k", freshness: freshness) { try await loader.load { _ in "new" } }
        }
        #expect(try outcome.get() == "old")
        #expect(cache.loads.isLoading("k") || loader.count == 1, "no load was started")
    }

    /// a background reload (refreshAfter) started before a removal stores its value after
    /// it: the removed key comes back. A removal or insert is the newer word on the key (an
    /// invalidation because the origin changed, say); Caffeine discards a refresh whose entry was
    /// removed or replaced meanwhile. Same for a soft/hard-timeout load finishing later.
    @Test("a refresh under way does not bring back a value removed meanwhile")
    func refreshDoesNotResurrectRemoval() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        cache["k"] = "v1"
        clock.advance(by: .seconds(61))
        let reload = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await reload.load { _ in "v2" } } == "v1")
        await FreshnessTests.waitUntil { reload.count == 1 }
        cache.removeValue(forKey: "k")
        reload.open()
        await FreshnessTests.waitUntil { !cache.loads.isLoading("k") }
        #expect(cache["k"] == nil, "the removal came after the reload started")
    }

    /// A removeAll() after a load started supersedes it as a removal of its key does, in a
    /// two-tier and in a memory-only cache.
    @Test("a load under way does not bring back what removeAll() removed", arguments: [true, false])
    func loadDoesNotSurviveRemoveAll(twoTier: Bool) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache =
            twoTier
            ? try FreshnessTests.open(dir, clock: ManualClock())
            : Cache<String, String>(memory: .init())
        defer { cache.close() }
        let loader = GatedLoader()
        let waiting = Task { try await cache.value(forKey: "k") { try await loader.load { _ in "loaded" } } }
        await FreshnessTests.waitUntil { loader.count == 1 }
        cache.removeAll()
        loader.open()
        #expect(try await waiting.value == "loaded", "the caller still gets its value")
        #expect(cache["k"] == nil, "but it is not stored over the removal")
        let again = try await cache.value(forKey: "k") { "second" }
        #expect(again == "second")
        #expect(cache["k"] == "second")
    }

    /// likewise an explicit insert made while a refresh is under way is overwritten by
    /// the refresh's (older) value.
    @Test("a refresh under way does not overwrite a value inserted meanwhile")
    func refreshDoesNotOverwriteNewerInsert() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        cache["k"] = "v1"
        clock.advance(by: .seconds(61))
        let reload = GatedLoader()
        #expect(
            try await cache.value(forKey: "k", freshness: freshness) { try await reload.load { _ in "refreshed" } }
                == "v1")
        await FreshnessTests.waitUntil { reload.count == 1 }
        cache["k"] = "inserted later"
        reload.open()
        await FreshnessTests.waitUntil { !cache.loads.isLoading("k") }
        #expect(cache["k"] == "inserted later")
    }

    /// the stale value is captured when the call starts and served whenever the loader
    /// fails, however late: a loader that fails after the window ended still hands the caller a
    /// value that is "gone as today" (rule: stale-if-error serves within the window and throws
    /// past it). The same holds for a soft timeout that fires past the window.
    @Test("a loader that fails after the stale window ended does not get the caller the stale value")
    func staleNotServedPastItsWindow() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100))
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v1" }
        clock.advance(by: .seconds(20))  // stale, window until 110 s
        let slow = GatedLoader()
        let caller = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await slow.load { _ in throw Failure() } }
        }
        await FreshnessTests.waitUntil { slow.count == 1 }
        clock.advance(by: .seconds(200))  // the window ended at 110 s
        #expect(cache.memory.totalCount == 1)
        cache.removeExpired()
        #expect(cache.memory.totalCount == 0, "both tiers consider it gone")
        slow.open()
        await #expect(throws: Failure.self) { try await caller.value }
    }

    /// a bulk call that throws counts the stale values it would have served for other
    /// keys: `staleServedOnError` goes up although the caller got no value at all.
    @Test("a bulk call that throws counts no stale value as served")
    func bulkThrowCountsNoStaleServed() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100))
        _ = try await cache.values(forKeys: ["e1"], expiresAfter: .seconds(10), freshness: freshness) { keys in
            Dictionary(uniqueKeysWithValues: keys.map { ($0, "v \($0)") })
        }
        clock.advance(by: .seconds(20))
        await #expect(throws: Failure.self) {
            try await cache.values(forKeys: ["e1", "new"], freshness: freshness) { _ in throw Failure() }
        }
        #expect(cache.statistics.staleServedOnError == 0)
    }

    /// `CacheStatistics.refreshes` is "background reloads that stored a new value", but a
    /// reload whose loader says `isCacheable = false` stores nothing and is counted all the same.
    @Test("a refresh whose loader keeps its value out of the cache is not counted as one that stored")
    func nonCacheableRefreshIsNotASuccessfulRefresh() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        cache["k"] = "v1"
        clock.advance(by: .seconds(61))
        let value = try await cache.value(forKey: "k", freshness: Freshness(refreshAfter: .seconds(60))) { context in
            context.isCacheable = false
            return "v2"
        }
        #expect(value == "v1")
        await FreshnessTests.waitUntil { !cache.loads.isLoading("k") }
        #expect(cache["k"] == "v1", "nothing was stored")
        #expect(cache.statistics.refreshes == 0)
    }

    /// the memory tier's own `removeValue(forKey:)` returns a value kept only to be served
    /// stale, though such a value is "never returned by plain lookups, contains or the tiers' own
    /// APIs". (An expired entry not yet trimmed was returned the same way before this change; the
    /// stale window now keeps it returnable for the whole of `staleIfError`.)
    @Test("MemoryCache.removeValue does not return a value past its expiry kept for staleIfError")
    func memoryRemoveValueHidesStale() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        _ = try await cache.value(
            forKey: "k", expiresAfter: .seconds(10), freshness: Freshness(staleIfError: .seconds(3_600))
        ) { "secret" }
        clock.advance(by: .seconds(20))
        #expect(cache.memory["k"] == nil)
        #expect(!cache.memory.contains("k"))
        #expect(cache.memory.removeValue(forKey: "k") == nil)
    }

    /// Counters: `values(forKeys:)` without a loader looks a missing key up once per
    /// duplicate, counting a miss in each tier every time; the bulk loader's form counts it once.
    @Test("values(forKeys:) counts a duplicate missing key once")
    func valuesForKeysCountsDuplicatesOnce() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        let before = cache.statistics
        #expect(cache.values(forKeys: ["missing", "missing", "missing"]).isEmpty)
        let after = cache.statistics
        #expect(after.memory.misses - before.memory.misses == 1)
        #expect(after.disk.misses - before.disk.misses == 1)
    }

    // MARK: Pins (pass now)

    /// a windowed record read back after a reopen is promoted with the node's
    /// `servedUntil` = the record's expiry and `expires` = its window's end: before the expiry
    /// every API sees it; past it the memory tier's own APIs, `contains` and `metadata` do not,
    /// a failing get-or-load serves it from memory, and it goes at the window's end.
    @Test("a promoted windowed record keeps its expiry and window in memory")
    func promotedWindowedRecord() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let start = clock.clock.now
        let freshness = Freshness(staleIfError: .seconds(100))
        do {
            let cache = try FreshnessTests.open(dir, clock: clock)
            _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "v1" }
            cache.close()
        }
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        #expect(cache["k"] == "v1", "promoted")
        #expect(cache.memory["k"] == "v1")
        #expect(cache.metadata(forKey: "k")?.expiresAt == start.addingTimeInterval(10))
        #expect(cache.metadata(forKey: "k")?.storedAt == start)

        clock.advance(by: .seconds(10))
        #expect(cache.memory["k"] == nil)
        #expect(!cache.memory.contains("k"))
        #expect(!cache.contains("k"))
        #expect(cache["k"] == nil)
        #expect(cache.metadata(forKey: "k") == nil)
        #expect(try cache.disk?.data(forKey: "k") == nil)
        cache.memory.removeExpired()
        #expect(cache.memory.totalCount == 1, "kept in memory for the window")
        // Served from memory: the disk copy is removed first.
        try cache.disk?.removeData(forKey: "k")
        #expect(try await cache.value(forKey: "k", freshness: freshness) { throw Failure() } == "v1")

        clock.advance(by: .seconds(100))
        cache.memory.removeExpired()
        #expect(cache.memory.totalCount == 0, "gone at the window's end")
    }

    /// a get-or-load whose disk read promotes a value does not overwrite an insert that
    /// landed while it decoded (the `ifGeneration` check on the new `entryForLoad` path).
    @Test("entryForLoad's promotion never overwrites an insert made during its decode")
    func entryForLoadPromotionRace() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let codec = GatedStringCodec(stoppingAt: .decode, for: "old")
        let cache = try FreshnessTests.open(dir, clock: clock, codec: codec)
        defer { cache.close() }
        cache.store("old", forKey: "k", cost: nil, expiresAfter: .seconds(10), staleFor: .seconds(100))
        try cache.flush()
        cache.memory.removeValue(forKey: "k")
        let reader = DispatchGroup()
        let found = Locked<String?>(nil)
        DispatchQueue.global().async(group: reader) {
            let entry = cache.entryForLoad(forKey: "k")
            found.withLock { $0 = entry?.value }
        }
        codec.entered.wait()
        cache["k"] = "new"
        codec.release.signal()
        reader.wait()
        #expect(found.withLock { $0 } == "old")
        #expect(cache.memory["k"] == "new")
        #expect(cache["k"] == "new")
    }

    /// a bulk loader returning keys it was not asked for: they are neither returned nor
    /// cached, and a duplicate key is asked once.
    @Test("extra keys from a bulk loader are ignored; duplicates are asked once")
    func bulkExtraKeys() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        let asked = Locked<[[String]]>([])
        let values = try await cache.values(forKeys: ["a", "a", "b"]) { keys in
            asked.withLock { $0.append(keys) }
            return ["a": "A", "b": "B", "extra": "X"]
        }
        #expect(values == ["a": "A", "b": "B"])
        #expect(asked.withLock { $0 } == [["a", "b"]])
        #expect(cache["extra"] == nil)
    }

    /// extreme durations saturate instead of trapping or wrapping: a "forever" expiry with a
    /// window is no window (format 2), a window reaching past `UInt64.max` ends there, and a zero
    /// expiry with a window is stale at once and still served on error.
    @Test("Duration.seconds(Int64.max) and zero expiries with staleIfError")
    func extremeDurations() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let forever = Duration.seconds(Int64.max)
        _ = try await cache.value(
            forKey: "forever", expiresAfter: forever, freshness: Freshness(staleIfError: forever)
        ) { "f" }
        _ = try await cache.value(
            forKey: "long-window", expiresAfter: .seconds(1), freshness: Freshness(staleIfError: forever)
        ) { "w" }
        _ = try await cache.value(
            forKey: "zero", expiresAfter: .zero, freshness: Freshness(staleIfError: .seconds(10))
        ) { "z" }
        _ = try await cache.value(
            forKey: "negative", expiresAfter: .seconds(-5), freshness: Freshness(staleIfError: .seconds(-5))
        ) { "n" }
        try cache.flush()
        #expect(try cache.disk?.storedEntry(forKey: Array("forever".utf8))?.staleUntil == nil)
        #expect(try cache.disk?.storedEntry(forKey: Array("long-window".utf8))?.staleUntil == UInt64.max)
        #expect(cache["forever"] == "f")
        #expect(cache["zero"] == nil)
        #expect(cache["negative"] == nil)
        #expect(
            try await cache.value(forKey: "zero", freshness: Freshness(staleIfError: .seconds(10))) {
                throw Failure()
            } == "z")
        clock.advance(by: .seconds(2))
        #expect(cache["long-window"] == nil)
        #expect(
            try await cache.value(forKey: "long-window", freshness: Freshness(staleIfError: .seconds(1))) {
                throw Failure()
            } == "w")
    }
}
