import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

@Suite("Bulk get-or-load")
struct BulkLoadTests {
    struct Failure: Error, Equatable {}

    /// A bulk loader that records the keys of each call and, while gated, waits for `open()`.
    final class BulkLoader: Sendable {
        private let calls = Locked<[[String]]>([])
        private let gate: AsyncGate?

        init(gated: Bool = false) {
            gate = gated ? AsyncGate() : nil
        }

        var keys: [[String]] { calls.withLock { $0 } }

        func load(_ keys: [String], leaving absent: Set<String> = [], failing: Bool = false) async throws -> [String:
            String]
        {
            calls.withLock { $0.append(keys) }
            await gate?.wait()
            if failing { throw Failure() }
            var values: [String: String] = [:]
            for key in keys where !absent.contains(key) { values[key] = "loaded \(key)" }
            return values
        }

        func open() { gate?.open() }
    }

    static func open(_ dir: TemporaryDirectory, clock: ManualClock = ManualClock()) throws -> Cache<String, String> {
        var configuration = Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        return try Cache(directory: dir.url, configuration: configuration)
    }

    static func waitUntil(_ condition: () -> Bool, sourceLocation: SourceLocation = #_sourceLocation) async {
        await GetOrLoadTests.waitUntil(condition, sourceLocation: sourceLocation)
    }

    @Test("one loader call with exactly the keys both tiers missed; the loaded values are stored")
    func loadsExactlyTheMissingKeys() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        cache["a1"] = "cached a1"
        cache.insert("on disk a4", forKey: "a4")
        try cache.flush()
        cache.memory.removeValue(forKey: "a4")
        let loader = BulkLoader()
        let values = try await cache.values(forKeys: ["a1", "a2", "a3", "a2", "a4"]) { try await loader.load($0) }
        #expect(values == ["a1": "cached a1", "a2": "loaded a2", "a3": "loaded a3", "a4": "on disk a4"])
        #expect(loader.keys == [["a2", "a3"]])
        #expect(cache["a2"] == "loaded a2" && cache["a3"] == "loaded a3")
        #expect(cache.statistics.bulkLoads == 1 && cache.statistics.bulkLoadKeys == 2)

        // Nothing missing: no loader call.
        _ = try await cache.values(forKeys: ["a1", "a2"]) { try await loader.load($0) }
        #expect(loader.keys.count == 1)
    }

    @Test("keys the loader leaves out stay absent and are not cached")
    func absentKeysStayAbsent() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let loader = BulkLoader()
        let values = try await cache.values(forKeys: ["b1", "b2"]) { try await loader.load($0, leaving: ["b2"]) }
        #expect(values == ["b1": "loaded b1"])
        #expect(cache["b2"] == nil)
        _ = try await cache.values(forKeys: ["b1", "b2"]) { try await loader.load($0, leaving: ["b2"]) }
        #expect(loader.keys == [["b1", "b2"], ["b2"]])
    }

    @Test("a bulk load joins a single-key load under way instead of loading its key again")
    func bulkJoinsSingleLoad() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let single = GetOrLoadTests.GatedLoader()
        let one = Task { try await cache.value(forKey: "c1") { try await single.load { _ in "single c1" } } }
        await Self.waitUntil { single.count == 1 }
        let loader = BulkLoader()
        let bulk = Task { try await cache.values(forKeys: ["c1", "c2"]) { try await loader.load($0) } }
        // The bulk caller joins c1's load as it claims c2, before its own loader runs.
        await Self.waitUntil { cache.loads.waiterCount(forKey: "c1") == 2 && !loader.keys.isEmpty }
        #expect(loader.keys == [["c2"]])
        single.open()
        #expect(try await bulk.value == ["c1": "single c1", "c2": "loaded c2"])
        #expect(try await one.value == "single c1")
    }

    @Test("single-key loads join a bulk load under way; a key it leaves out is notFound for them")
    func singleJoinsBulkLoad() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let loader = BulkLoader(gated: true)
        let bulk = Task {
            try await cache.values(forKeys: ["d1", "d2"]) { try await loader.load($0, leaving: ["d2"]) }
        }
        await Self.waitUntil { loader.keys.count == 1 }
        let single = GetOrLoadTests.GatedLoader()
        let joined = Task { try await cache.value(forKey: "d1") { try await single.load { _ in "single" } } }
        let absent = Task { try await cache.value(forKey: "d2") { try await single.load { _ in "single" } } }
        await Self.waitUntil {
            cache.loads.waiterCount(forKey: "d1") == 1 && cache.loads.waiterCount(forKey: "d2") == 1
        }
        loader.open()
        #expect(try await joined.value == "loaded d1")
        await #expect(throws: CacheError.notFound(key: "d2")) { try await absent.value }
        #expect(try await bulk.value == ["d1": "loaded d1"])
        #expect(single.count == 0)
    }

    @Test("a failing loader: its error, unless every failed key has a stale value to serve")
    func failureAndStale() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(staleIfError: .seconds(100))
        let loader = BulkLoader()
        _ = try await cache.values(forKeys: ["e1", "e2"], expiresAfter: .seconds(10), freshness: freshness) {
            try await loader.load($0)
        }
        clock.advance(by: .seconds(20))
        let served = try await cache.values(forKeys: ["e1", "e2"], freshness: freshness) {
            try await loader.load($0, failing: true)
        }
        #expect(served == ["e1": "loaded e1", "e2": "loaded e2"])
        #expect(cache.statistics.staleServedOnError == 2)
        await #expect(throws: Failure.self) {
            try await cache.values(forKeys: ["e1", "new"], freshness: freshness) {
                try await loader.load($0, failing: true)
            }
        }
        #expect(loader.keys.last == ["e1", "new"])
    }

    @Test("refreshAfter: due values are returned and reloaded in one background call")
    func bulkRefresh() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let cache = try Self.open(dir, clock: clock)
        defer { cache.close() }
        let freshness = Freshness(refreshAfter: .seconds(60))
        cache["f1"] = "old f1"
        cache["f2"] = "old f2"
        clock.advance(by: .seconds(60))
        cache["f3"] = "new f3"
        let loader = BulkLoader(gated: true)
        let values = try await cache.values(forKeys: ["f1", "f2", "f3"], freshness: freshness) {
            try await loader.load($0)
        }
        #expect(values == ["f1": "old f1", "f2": "old f2", "f3": "new f3"])
        await Self.waitUntil { loader.keys.count == 1 }
        #expect(loader.keys == [["f1", "f2"]])
        loader.open()
        await Self.waitUntil { cache.statistics.refreshes == 2 }
        #expect(cache["f1"] == "loaded f1" && cache["f2"] == "loaded f2" && cache["f3"] == "new f3")
    }

    @Test("a cancelled bulk caller fails no one else; the load is stored")
    func cancellation() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let loader = BulkLoader(gated: true)
        let bulk = Task { try await cache.values(forKeys: ["g1", "g2"]) { try await loader.load($0) } }
        await Self.waitUntil { loader.keys.count == 1 }
        let joined = Task { try await cache.value(forKey: "g2") { "single" } }
        await Self.waitUntil { cache.loads.waiterCount(forKey: "g2") == 1 }
        bulk.cancel()
        await #expect(throws: CancellationError.self) { try await bulk.value }
        loader.open()
        #expect(try await joined.value == "loaded g2")
        await Self.waitUntil { !cache.loads.isLoading("g1") }
        #expect(cache["g1"] == "loaded g1")
    }
}
