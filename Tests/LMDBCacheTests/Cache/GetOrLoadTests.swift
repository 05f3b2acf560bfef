import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

@Suite("Get-or-load")
struct GetOrLoadTests {
    struct LoadError: Error, Equatable {
        var attempt: Int
    }

    /// A loader that counts its runs and, until `open()` is called, waits: so a test knows every
    /// caller is waiting before the load completes, without sleeping.
    final class GatedLoader: Sendable {
        private let runs = Locked(0)
        private let gate = AsyncGate()

        var count: Int { runs.withLock { $0 } }

        func load(_ result: @Sendable (Int) throws -> String) async throws -> String {
            let attempt = runs.withLock { runs in
                runs += 1
                return runs
            }
            await gate.wait()
            return try result(attempt)
        }

        func open() { gate.open() }
    }

    /// Waits until `condition` holds, yielding between checks; records a hang ("hung: …") instead
    /// of waiting for ever when it still does not after ``hangBound`` (a broken coalescer never
    /// gathers its waiters).
    ///
    /// The bound counts the time this wait was given to run, not the time that passed: a poll
    /// that comes back late counts at most ``starvedPoll``. Beside the whole suite under
    /// AddressSanitizer (every test in flight on a two-thread cooperative pool, 784 s in the CI
    /// run of 3b4412d) a task queued behind the others waited more than ``hangBound`` of wall
    /// time for its turn, and a wait that counted wall time reported a hang that was none. A
    /// wall time of ``starvedWallBound`` still ends the wait, reported as a hang.
    static func waitUntil(
        _ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation
    ) async {
        let started = ContinuousClock.now
        var last = started
        var waited: Duration = .zero
        var polls = 0
        while waited < hangBound && last - started < starvedWallBound {
            if condition() { return }
            polls += 1
            // Yields first (most conditions hold within a few turns), then pauses between polls:
            // a poll that only yields keeps a thread of the two-thread cooperative pool busy, and
            // beside the whole suite under a sanitizer it starved the tasks it waits for.
            if polls < 100 { await Task.yield() } else { try? await Task.sleep(for: .milliseconds(1)) }
            let now = ContinuousClock.now
            waited += min(now - last, starvedPoll)
            last = now
        }
        if condition() { return }
        recordHang("the awaited condition", sourceLocation: sourceLocation)
    }

    /// The most one poll of ``waitUntil(_:sourceLocation:)`` counts towards ``hangBound``: a
    /// 1 ms pause that took longer waited for a thread, not for the condition.
    static let starvedPoll: Duration = .milliseconds(20)
    /// The wall time after which ``waitUntil(_:sourceLocation:)`` reports a hang however starved
    /// it was: longer than any CI stage.
    static let starvedWallBound: Duration = .seconds(1_800)

    @Test("100 concurrent callers of a missing key run the loader once and all get its value")
    func coalescing() async throws {
        let cache = Cache<String, String>(memory: .init(countLimit: 100))
        let loader = GatedLoader()
        try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    try await cache.value(forKey: "k") { try await loader.load { "value \($0)" } }
                }
            }
            await Self.waitUntil { cache.loads.waiterCount(forKey: "k") == 100 }
            loader.open()
            var results: [String] = []
            for try await value in group { results.append(value) }
            #expect(results == Array(repeating: "value 1", count: 100))
        }
        #expect(loader.count == 1)
        #expect(cache["k"] == "value 1", "the loaded value is cached")
        #expect(cache.statistics.loads == 1)
        _ = try await cache.value(forKey: "k") {
            Issue.record("a hit must not load"); return ""
        }
    }

    @Test("a get-or-load that misses counts one miss in each tier, and its hit afterwards one hit")
    func statisticsCountEachCallOnce() async throws {
        let directory = TemporaryDirectory()
        defer { directory.remove() }
        let cache = try Cache<String, String>(directory: directory.url)
        defer { cache.close() }
        _ = try await cache.value(forKey: "k") { "loaded" }
        var statistics = cache.statistics
        #expect(statistics.memory.misses == 1)
        #expect(statistics.disk.misses == 1)
        #expect(statistics.memory.hits == 0)
        #expect(statistics.loads == 1)
        _ = try await cache.value(forKey: "k") { "not loaded" }
        statistics = cache.statistics
        #expect(statistics.memory.hits == 1)
        #expect(statistics.memory.misses == 1)
        #expect(statistics.disk.misses == 1)
    }

    @Test("a loader's error reaches every waiter, is not cached, and the next call loads again")
    func errors() async throws {
        let cache = Cache<String, String>(memory: .init(countLimit: 100))
        let loader = GatedLoader()
        await withTaskGroup(of: (any Error)?.self) { group in
            for _ in 0..<20 {
                group.addTask {
                    do {
                        _ = try await cache.value(forKey: "k") {
                            try await loader.load { attempt in throw LoadError(attempt: attempt) }
                        }
                        return nil
                    } catch {
                        return error
                    }
                }
            }
            await Self.waitUntil { cache.loads.waiterCount(forKey: "k") == 20 }
            loader.open()
            for await error in group {
                #expect(error as? LoadError == LoadError(attempt: 1))
            }
        }
        #expect(loader.count == 1)
        #expect(cache["k"] == nil)
        let value = try await cache.value(forKey: "k") { "recovered" }
        #expect(value == "recovered")
        #expect(cache.statistics.loadFailures == 1)
        #expect(cache.statistics.loads == 2)
    }

    @Test("cancelling one waiter ends its wait and fails no one else")
    func cancellation() async throws {
        let cache = Cache<String, String>(memory: .init(countLimit: 100))
        let loader = GatedLoader()
        let first = Task { try await cache.value(forKey: "k") { try await loader.load { _ in "v" } } }
        await Self.waitUntil { loader.count == 1 }
        let cancelled = Task {
            try await cache.value(forKey: "k") {
                Issue.record("joined, not loaded"); return ""
            }
        }
        let third = Task {
            try await cache.value(forKey: "k") {
                Issue.record("joined, not loaded"); return ""
            }
        }
        await Self.waitUntil { cache.loads.waiterCount(forKey: "k") == 3 }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(cache.loads.waiterCount(forKey: "k") == 2)
        loader.open()
        #expect(try await first.value == "v")
        #expect(try await third.value == "v")
        #expect(loader.count == 1)
        #expect(cache["k"] == "v")
    }

    @Test("policies: use the cache else load, reload ignoring the cache, cache only")
    func policies() async throws {
        let cache = Cache<String, String>(memory: .init(countLimit: 100))
        await #expect(throws: CacheError.notFound(key: "k")) {
            try await cache.value(forKey: "k", policy: .cacheOnly) {
                Issue.record("never loads"); return ""
            }
        }
        #expect(try await cache.value(forKey: "k") { "loaded" } == "loaded")
        #expect(try await cache.value(forKey: "k", policy: .cacheOnly) { "" } == "loaded")
        #expect(try await cache.value(forKey: "k") { "again" } == "loaded")
        #expect(try await cache.value(forKey: "k", policy: .reloadIgnoringCache) { "reloaded" } == "reloaded")
        #expect(cache["k"] == "reloaded")
    }

    @Test("a loaded value goes to both tiers with the given expiry")
    func loadedValueIsStored() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer { cache.close() }
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(5)) { "v" }
        try cache.flush()
        #expect(try cache.disk?.data(forKey: "k") == Array("v".utf8))
        clock.advance(by: .seconds(5))
        #expect(cache["k"] == nil)
    }
}

/// A one-shot gate tasks wait on until it opens.
final class AsyncGate: Sendable {
    private let state = Locked<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    func wait() async {
        await withCheckedContinuation { continuation in
            let resumeNow = state.withLock { state -> Bool in
                if state.open { return true }
                state.waiters.append(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    func open() {
        let waiters = state.withLock { state in
            state.open = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}
