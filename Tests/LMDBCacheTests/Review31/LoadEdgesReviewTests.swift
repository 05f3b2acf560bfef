import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Review of issue 31, loading at its edges: a timeout of forever, a bulk caller and a covered
/// key, callers that give up on a hung load, a hung load itself, a refresh that comes late, a
/// refresh after close. Each test names the promise and fails without its fix; loaders wait on
/// gates the test opens, timeouts run on a clock the test advances (or, where the clock itself is
/// the subject, on the real one with nothing decided by how long anything took).
@Suite("Review 31: loading at its edges")
struct LoadEdgesReviewTests {
    typealias GatedLoader = GetOrLoadTests.GatedLoader

    struct Failure: Error, Equatable {}

    static func waitUntil(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await GetOrLoadTests.waitUntil(condition, sourceLocation: sourceLocation)
    }

    // MARK: 1. Forever

    @Test(
        "a timeout of forever (.seconds(Int64.max)) waits for the loader, soft or hard, and never traps",
        arguments: [(soft: true, hard: false), (soft: false, hard: true), (soft: true, hard: true)])
    func foreverTimeouts(soft: Bool, hard: Bool) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        // The real clock: its deadline arithmetic is what a forever timeout overflowed.
        configuration.timeoutClock = ContinuousClock()
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer { cache.close() }
        let forever = Duration.seconds(Int64.max)
        let freshness = Freshness(
            staleIfError: .seconds(3_600), timeout: soft ? forever : nil, hardTimeout: hard ? forever : nil)
        #expect(try await cache.value(forKey: "k", expiresAfter: .seconds(1), freshness: freshness) { "old" } == "old")
        clock.advance(by: .seconds(2))  // a stale value exists: the soft timeout's timer starts
        let loader = GatedLoader()
        let call = Task {
            try await cache.value(forKey: "k", expiresAfter: .seconds(1), freshness: freshness) {
                try await loader.load { _ in "new" }
            }
        }
        await Self.waitUntil { loader.count == 1 }
        loader.open()
        #expect(try await call.value == "new")
        #expect(cache["k"] == "new")
    }

    @Test("durations past what a clock holds saturate: nanoseconds at Int64's ends, timers at 100 years")
    func durationsSaturate() {
        #expect(Duration.seconds(Int64.max).nanoseconds == .max)
        #expect(Duration.seconds(Int64.min).nanoseconds == .min)
        #expect(Duration.milliseconds(1_500).nanoseconds == 1_500_000_000)
        #expect(Duration.seconds(Int64.max).forTimer == .longestTimer)
        #expect(Duration.seconds(-5).forTimer == .zero)
        #expect(Duration.milliseconds(250).forTimer == .milliseconds(250))
        // A deadline a forever timer sets is one the continuous clock can hold.
        _ = ContinuousClock.now.advanced(by: Duration.seconds(Int64.max).forTimer)
    }

    // MARK: 4. A bulk caller and a covered key

    @Test(
        "a bulk caller gets a covered key's outcome from the load that covered it, never a second loader call",
        arguments: ["error", "not cacheable", "left out"])
    func bulkTakesCoveredOutcome(outcome: String) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        defer { cache.close() }
        // The load that covers "a": a single-key load, or (for "left out") a bulk load that
        // leaves "a" out.
        let cover = GatedLoader()
        let covering = Task { () -> String? in
            switch outcome {
            case "error":
                return try await cache.value(forKey: "a") { try await cover.load { _ in throw Failure() } }
            case "not cacheable":
                return try await cache.value(forKey: "a") { context in
                    try await cover.load { _ in
                        context.isCacheable = false
                        return "uncached"
                    }
                }
            default:
                return try await cache.values(forKeys: ["a"]) { _ in
                    _ = try await cover.load { _ in "" }
                    return [:]
                }["a"]
            }
        }
        await Self.waitUntil { cover.count == 1 }
        let calls = Locked<[[String]]>([])
        let bulkGate = AsyncGate()
        let bulk = Task {
            try await cache.values(forKeys: ["a", "b"]) { keys in
                calls.withLock { $0.append(keys.sorted()) }
                await bulkGate.wait()
                return Dictionary(uniqueKeysWithValues: keys.map { ($0, "bulk \($0)") })
            }
        }
        await Self.waitUntil { calls.withLock { $0.count } == 1 }
        // The covering load ends while the bulk caller's own load is still running.
        cover.open()
        _ = try? await covering.value
        bulkGate.open()
        switch outcome {
        case "error":
            await #expect(throws: Failure.self) { try await bulk.value }
        case "not cacheable":
            #expect(try await bulk.value == ["a": "uncached", "b": "bulk b"])
        default:
            #expect(try await bulk.value == ["b": "bulk b"])
        }
        #expect(calls.withLock { $0 } == [["b"]], "the bulk loader ran once, with the key no load covered")
        #expect(cache.loads.runCount == 0)
    }

    // MARK: 5. Callers who give up, and a load that hangs

    @Test("callers that time out on a hung load leave it: nothing of theirs stays behind")
    func timedOutCallersLeave() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let timeouts = ManualTimeoutClock()
        let cache = try FreshnessTests.open(dir, clock: ManualClock(), timeouts: timeouts)
        defer { cache.close() }
        let hung = GatedLoader()
        let callers = 500
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<callers {
                group.addTask {
                    do {
                        _ = try await cache.value(forKey: "k", freshness: Freshness(hardTimeout: .seconds(1))) {
                            try await hung.load { _ in "late" }
                        }
                        return false
                    } catch CacheError.loadTimedOut {
                        return true
                    }
                }
            }
            await Self.waitUntil { timeouts.sleeperCount == callers }
            #expect(cache.loads.waiterCount(forKey: "k") == callers)
            timeouts.advance(by: .seconds(1))
            var timedOut = 0
            for try await didTimeOut in group where didTimeOut { timedOut += 1 }
            #expect(timedOut == callers)
        }
        #expect(cache.loads.waiterCount(forKey: "k") == 0, "every caller that gave up left the load")
        #expect(hung.count == 1)
        hung.open()
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == "late", "the load went on, and its value is stored")
    }

    @Test(
        "a load hung for four hard timeouts is not joined: a new load runs, and the hung one's late value is not stored"
    )
    func hungLoadIsReplaced() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let timeouts = ManualTimeoutClock()
        let cache = try FreshnessTests.open(dir, clock: ManualClock(), timeouts: timeouts)
        defer { cache.close() }
        let freshness = Freshness(hardTimeout: .seconds(1))
        let hung = GatedLoader()
        let first = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await hung.load { _ in "hung" } }
        }
        await Self.waitUntil { hung.count == 1 && timeouts.sleeperCount == 1 }
        timeouts.advance(by: .seconds(1))
        await #expect(throws: CacheError.self) { try await first.value }

        // Under four hard timeouts old, the load is joined (no second loader call).
        timeouts.advance(by: .seconds(2))
        let joiner = Task {
            try await cache.value(forKey: "k", freshness: freshness) {
                Issue.record("joined, not loaded")
                return ""
            }
        }
        await Self.waitUntil { timeouts.sleeperCount == 1 }
        timeouts.advance(by: .seconds(1))
        await #expect(throws: CacheError.self) { try await joiner.value }

        // Four hard timeouts old: a new load.
        let fresh = GatedLoader()
        let second = Task {
            try await cache.value(forKey: "k", freshness: freshness) { try await fresh.load { _ in "fresh" } }
        }
        await Self.waitUntil { fresh.count == 1 }
        fresh.open()
        #expect(try await second.value == "fresh")
        hung.open()
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == "fresh", "the hung load's late value did not replace the newer load's")
        try cache.flush()
        #expect(try cache.disk!.data(forKey: "k") == Array("fresh".utf8))
    }

    @Test("a load that is only slow, replaced by a later caller, still stores its value when no newer one came")
    func slowReplacedLoadStillStores() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let timeouts = ManualTimeoutClock()
        let cache = try FreshnessTests.open(dir, clock: ManualClock(), timeouts: timeouts)
        defer { cache.close() }
        let freshness = Freshness(hardTimeout: .seconds(1))
        var previous: GatedLoader?
        for round in 0..<3 {
            let loader = GatedLoader()
            let caller = Task {
                // Reloads, so a value stored by an earlier round does not answer it.
                try await cache.value(forKey: "k", policy: .reloadIgnoringCache, freshness: freshness) {
                    try await loader.load { _ in "v\(round)" }
                }
            }
            await Self.waitUntil { loader.count == 1 && timeouts.sleeperCount == 1 }
            if let previous {
                // The replaced load (slow, not hung) ends now, with no newer value stored.
                previous.open()
                await Self.waitUntil { cache.loads.runCount == 1 }
                #expect(cache["k"] == "v\(round - 1)", "round \(round): the only value loaded was discarded")
            }
            timeouts.advance(by: .seconds(1))
            _ = try? await caller.value
            timeouts.advance(by: .seconds(3))
            previous = loader
        }
        previous?.open()
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == "v2")
    }

    @Test("callers with a zero hard timeout still join the load under way: one loader call")
    func zeroHardTimeoutCoalesces() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let timeouts = ManualTimeoutClock()
        let cache = try FreshnessTests.open(dir, clock: ManualClock(), timeouts: timeouts)
        defer { cache.close() }
        let loader = GatedLoader()
        for _ in 0..<3 {
            await #expect(throws: CacheError.self) {
                try await cache.value(forKey: "k", freshness: Freshness(hardTimeout: .zero)) {
                    try await loader.load { "v\($0)" }
                }
            }
        }
        await Self.waitUntil { loader.count >= 1 }
        #expect(loader.count == 1)
        loader.open()
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(cache["k"] == "v1")
    }

    // MARK: 6. A late refresh

    @Test(
        "a refresh that comes after another refresh stored does not reload the value again", arguments: [true, false])
    func lateRefreshDoesNotReload(bulk: Bool) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try FreshnessTests.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        cache.insert("v1", forKey: "k")
        clock.advance(by: .seconds(61))
        // The first caller finds the value due and refreshes it.
        #expect(try await cache.value(forKey: "k", freshness: freshness) { "v2" } == "v1")
        await Self.waitUntil { cache.statistics.refreshes == 1 }
        #expect(cache["k"] == "v2")
        // A caller whose lookup found v1 due before that refresh stored starts its refresh only
        // now (the interleaving of `hit`'s lookup and its `refresh` call, made directly).
        let late = GatedLoader()
        late.open()
        if bulk {
            let request = BulkRequestFor.request(refreshAfter: .seconds(60)) { keys in
                _ = try await late.load { _ in "" }
                return Dictionary(uniqueKeysWithValues: keys.map { ($0, "v3") })
            }
            _ = cache.startBulk(request, forKeys: ["k"], refresh: true)
        } else {
            cache.refresh(
                "k",
                .init(cost: nil, expiresAfter: nil, staleFor: nil, load: .plain { try await late.load { _ in "v3" } }),
                dueAfter: .seconds(60))
        }
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(late.count == 0, "the value was no longer due")
        #expect(cache["k"] == "v2")
        #expect(cache.statistics.refreshes == 1)
    }

    // MARK: Also seen: a refresh after close

    @Test("a refresh that starts after close() does not run its loader", arguments: [true, false])
    func noRefreshAfterClose(bulk: Bool) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try FreshnessTests.open(dir, clock: ManualClock())
        cache.insert("v1", forKey: "k")
        cache.close()
        let loader = GatedLoader()
        loader.open()
        if bulk {
            let request = BulkRequestFor.request(refreshAfter: nil) { keys in
                _ = try await loader.load { _ in "" }
                return Dictionary(uniqueKeysWithValues: keys.map { ($0, "v2") })
            }
            _ = cache.startBulk(request, forKeys: ["k"], refresh: true)
        } else {
            cache.refresh(
                "k",
                .init(
                    cost: nil, expiresAfter: nil, staleFor: nil, load: .plain { try await loader.load { _ in "v2" } }),
                dueAfter: .zero)
        }
        await Self.waitUntil { cache.loads.runCount == 0 }
        #expect(loader.count == 0)
        #expect(cache.statistics.refreshFailures == 0, "a refresh the close stopped is not a failed one")
    }
}

/// Builds a `Cache<String, String>.BulkRequest` for tests that call the bulk machinery directly.
enum BulkRequestFor {
    static func request(
        refreshAfter: Duration?, load: @escaping @Sendable ([String]) async throws -> [String: String]
    ) -> Cache<String, String>.BulkRequest {
        Cache<String, String>.BulkRequest(
            expiresAfter: nil, staleFor: nil, refreshAfter: refreshAfter, tags: [], load: load)
    }
}
