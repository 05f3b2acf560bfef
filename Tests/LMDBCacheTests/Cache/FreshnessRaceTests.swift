import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Loads racing timers and writes: found by a second review of the get-or-load split and of
/// supersession; each failed before the fix that followed it.
/// Each test fails against the code it was written for. No sleeps, no timing thresholds.
@Suite("Freshness: loads racing timers and writes")
struct FreshnessRaceTests {
    typealias GatedLoader = GetOrLoadTests.GatedLoader

    struct Failure: Error, Equatable {}

    /// An executor that runs its jobs only when the test says, oldest first, one at a time.
    final class HeldExecutor: TaskExecutor, @unchecked Sendable {
        private let lock = NSLock()
        private var jobs: [UnownedJob] = []

        var queued: Int { lock.withLock { jobs.count } }

        func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            lock.withLock { jobs.append(job) }
        }

        /// Runs the oldest queued job; false when none is queued.
        @discardableResult
        func runOne() -> Bool {
            guard let job = lock.withLock({ jobs.isEmpty ? nil : jobs.removeFirst() }) else { return false }
            job.runSynchronously(on: asUnownedTaskExecutor())
            return true
        }

        func drain() {
            while runOne() {}
        }
    }

    // MARK: 1. A soft timeout past the stale window throws instead of waiting on

    /// `Freshness.timeout`: "When the loader has not answered after this long and a stale value
    /// exists (within staleIfError), the caller gets the stale value ... Without a stale value the
    /// caller waits on." When the stale value captured at the start of the call leaves its window
    /// before the soft timer fires, `wait` (Cache+Loading.swift, `.timedOut`) finds `serve` nil and
    /// throws `loadTimedOut(after: timeout)`: a soft timeout ends the wait with an error, and is
    /// counted as a load timeout, though no hard timeout was set.
    @Test("a soft timeout that fires after the stale window ended waits on for the load")
    func softTimeoutPastWindowWaitsOn() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache = try FreshnessTests.open(dir, clock: clock, timeouts: timeouts)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100), timeout: .seconds(1))
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "old" }
        clock.advance(by: .seconds(20))  // stale, window until 110 s
        let loader = GatedLoader()
        let caller = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await loader.load { _ in "new" } }
        }
        await FreshnessTests.waitUntil { loader.count == 1 && timeouts.sleeperCount == 1 }
        clock.advance(by: .seconds(200))  // the window ended at 110 s: no stale value any more
        timeouts.advance(by: .seconds(1))  // the soft timeout fires
        loader.open()
        let result = await caller.result
        #expect(throws: Never.self) { try result.get() }
        #expect((try? result.get()) == "new", "no hard timeout: the caller waits on for the load")
        #expect(cache.statistics.loadTimeouts == 0)
    }

    // MARK: 2. With a timeout, one call can run the loader twice

    /// `wait` with a timeout starts the flight with `loads.start(forKey:run:)`, then a child of the
    /// task group joins it with `loads.value(forKey:run:)`, passing the same `run`. When the flight
    /// ends before the child reaches the coalescer (a loader that fails at once: a backend that
    /// refuses connections), the child finds no flight and starts a second one: one call runs the
    /// loader twice, and counts two loads and two failures. The child is held here on an executor
    /// the test drains; on the global executor the same happens whenever the flight's task wins.
    @Test("a get-or-load with a hard timeout runs a failing loader once")
    func timeoutCallLoadsOnce() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        let calls = Locked(0)
        let executor = HeldExecutor()
        let result = Locked<Result<String, any Error>?>(nil)
        Task(executorPreference: executor) {
            let outcome: Result<String, any Error>
            do {
                outcome = .success(
                    try await cache.value(forKey: "k", freshness: Freshness(hardTimeout: .seconds(60))) {
                        calls.withLock { $0 += 1 }
                        throw Failure()
                    })
            } catch {
                outcome = .failure(error)
            }
            result.withLock { $0 = outcome }
        }
        // The caller's first job: its miss, `loads.start` (the flight runs on the global
        // executor), and the task group's children queued here.
        await FreshnessTests.waitUntil { executor.queued == 1 }
        executor.runOne()
        await FreshnessTests.waitUntil { calls.withLock { $0 } == 1 && !cache.loads.isLoading("k") }
        // Now the load child joins.
        while result.withLock({ $0 }) == nil {
            executor.drain()
            await Task.yield()
        }
        #expect(throws: Failure.self) { try result.withLock { $0 }!.get() }
        #expect(calls.withLock { $0 } == 1, "one call, one load")
        #expect(cache.statistics.loads == 1)
        #expect(cache.statistics.loadFailures == 1)
    }

    // MARK: 3. A stale value is served after its key was removed

    /// The stale value is captured when the call starts. A removal of the key while the load runs
    /// (an invalidation: the value is wrong) supersedes the load, so its result is not stored,
    /// but when the loader then fails the caller is served the captured value, which neither tier
    /// holds any more: the removal's "newer word on the key" is ignored for the stale path, as
    /// the window's end is not (staleNotServedPastItsWindow).
    /// With a newer insert instead of the removal it is worse: the cache holds a live "newer"
    /// while the caller is served the stale "revoked".
    @Test(
        "a stale value removed or replaced while the load runs is not served when the loader fails",
        arguments: [false, true])
    func staleNotServedAfterRemoval(replace: Bool) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100))
        _ = try await cache.value(forKey: "k", expiresAfter: .seconds(10), freshness: freshness) { "revoked" }
        clock.advance(by: .seconds(20))  // stale, window until 110 s
        let loader = GatedLoader()
        let caller = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await loader.load { _ in throw Failure() } }
        }
        await FreshnessTests.waitUntil { loader.count == 1 }
        if replace { cache["k"] = "newer" } else { cache.removeValue(forKey: "k") }
        loader.open()
        let result = await caller.result
        #expect((try? result.get()) != "revoked", "the removed value came back through the stale path")
        #expect(cache["k"] == (replace ? "newer" : nil))
    }
}
