#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
import LMDBCacheRedis
import Synchronization
import Testing

/// The Redis tier through the public API: caches in this process, each on its own directory (as
/// on its own machine), sharing one real `redis-server`.
@Suite("Redis tier", .serialized)
struct RemoteTierTests {
    /// A cache on a directory of its own with the Redis tier on `server`.
    static func machine(
        _ server: RedisServer, namespace: String = "t", timeout: Duration = hangBound,
        threshold: Int = 5, freshness: Freshness = Freshness(), clock: CacheClock? = nil,
        adjust: (inout RedisConfiguration) -> Void = { _ in }
    ) async throws -> (Cache<String, String>, TemporaryDirectory) {
        let directory = TemporaryDirectory()
        var configuration = Cache<String, String>.Configuration()
        var redis = RedisConfiguration(
            endpoints: [.init(host: "127.0.0.1", port: server.port)], password: server.password,
            namespace: namespace, commandTimeout: timeout, failureThreshold: threshold)
        adjust(&redis)
        configuration.remote = .redis(redis)
        configuration.freshness = freshness
        configuration.clock = clock
        let cache = try Cache<String, String>(directory: directory.url, configuration: configuration)
        // Subscribed before the test goes on: changes published before are not heard.
        await waitFor("the cache subscribed to changes") { cache.statistics.remote?.isSubscribed == true }
        return (cache, directory)
    }

    /// Waits until `cache`'s remote counts satisfy `condition` (`what`, for the hang report).
    static func wait(
        _ cache: Cache<String, String>, _ what: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ condition: @escaping @Sendable (RemoteStatistics) -> Bool
    ) async {
        await waitFor(what, sourceLocation: sourceLocation) { condition(cache.statistics.remote ?? RemoteStatistics()) }
    }

    /// A loader that counts its runs and returns `value`.
    final class CountingLoader: Sendable {
        let runs = Atomic<Int>(0)
        func load(_ value: String) -> @Sendable () async throws -> String {
            { [self] in
                runs.add(1, ordering: .relaxed)
                return value
            }
        }
    }

    @Test("A value stored on one machine is read by another from Redis, without its loader")
    func sharedValue() async throws {
        let server = try await RedisServer()
        // One clock for both machines, standing still at the real time (Redis expires the record
        // by it): the expiries compared below do not depend on how far apart two reads of a
        // running clock fall on a busy machine.
        let clock = ManualClock(Date()).clock
        let (one, d1) = try await Self.machine(server, clock: clock)
        let (two, d2) = try await Self.machine(server, clock: clock)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("v1", forKey: "k", expiresAfter: .seconds(600))
        await Self.wait(one, "the write reached Redis") { $0.writes >= 1 }
        // Machine two has heard of the write: a load under way when it hears of a change stores
        // nothing (it cannot tell whether it read before or after), and this test wants the store.
        await Self.wait(two, "machine two heard of the write") { $0.changesReceived >= 1 }
        let loader = CountingLoader()
        #expect(try await two.value(forKey: "k", load: loader.load("loaded")) == "v1")
        #expect(loader.runs.load(ordering: .relaxed) == 0)
        #expect(two.statistics.remote?.hits == 1)
        // Stored locally with the remaining lifetime: the same expiry as the writer's.
        let written = try #require(one.metadata(forKey: "k"))
        let read = try #require(two.metadata(forKey: "k"))
        // The writer's memory and disk tiers read the clock once each (here the same instant); a
        // millisecond of rounding at most.
        let difference = try #require(read.expiresAt).timeIntervalSince(try #require(written.expiresAt))
        #expect(abs(difference) < 0.01)
        // Now a local hit: Redis is not asked again.
        #expect(two.value(forKey: "k") == "v1")
        one.close()
        two.close()
    }

    @Test("An overwrite, a removal and a tag removal on one machine reach the others' local tiers")
    func invalidation() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        let (two, d2) = try await Self.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("a1", forKey: "a", tags: ["t"])
        one.insert("b1", forKey: "b", tags: ["t"])
        one.insert("c1", forKey: "c")
        await Self.wait(one, "the three writes reached Redis") { $0.writes >= 3 }
        await Self.wait(two, "machine two heard of the three writes") { $0.changesReceived >= 3 }
        let loader = CountingLoader()
        for key in ["a", "b", "c"] { _ = try await two.value(forKey: key, load: loader.load("x")) }
        #expect(two.value(forKey: "a") == "a1")
        #expect(loader.runs.load(ordering: .relaxed) == 0)

        let before = two.statistics.remote?.changesReceived ?? 0
        one.insert("c2", forKey: "c")
        await Self.wait(two, "machine two heard of the overwrite") { $0.changesReceived >= before + 1 }
        #expect(two.value(forKey: "c") == nil, "the local copy was dropped")
        #expect(try await two.value(forKey: "c", load: loader.load("x")) == "c2")

        #expect(one.removeAll(taggedWith: "t") == 2)
        await Self.wait(two, "machine two heard of the tag removal") { $0.changesReceived >= before + 2 }
        #expect(two.value(forKey: "a") == nil)
        #expect(two.value(forKey: "b") == nil)
        #expect(try await two.value(forKey: "a", load: loader.load("reloaded")) == "reloaded", "gone from Redis too")

        one.removeValue(forKey: "c")
        await Self.wait(two, "machine two heard of the removal") { $0.changesReceived >= before + 3 }
        #expect(two.value(forKey: "c") == nil)
        #expect(try await two.value(forKey: "c", load: loader.load("c3")) == "c3")
        one.close()
        two.close()
    }

    @Test("A damaged or foreign record in Redis is a miss, never a wrong value, and is replaced")
    func damagedRecord() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server)
        defer { d1.remove() }
        // Another program's value under the cache's key: a miss, replaced by the loaded value.
        _ = try server.cli(["SET", "t:v:k", "not a record"])
        let loader = CountingLoader()
        #expect(try await one.value(forKey: "k", load: loader.load("loaded")) == "loaded")
        #expect(loader.runs.load(ordering: .relaxed) == 1)
        one.insert("other", forKey: "other")
        // The loaded value (over the foreign one), and "other".
        await Self.wait(one, "the two writes reached Redis") { $0.writes >= 2 && $0.pendingWrites == 0 }
        #expect(try server.cli(["GETRANGE", "t:v:k", "0", "3"]).hasPrefix("LCR1"))
        // Another key's record copied under this key: its key check fails; counted, and removed
        // there (a tombstone of the version read: a newer value would stay).
        _ = try server.cli(["COPY", "t:v:other", "t:v:k2"])
        #expect(try await one.value(forKey: "k2", load: loader.load("mine")) == "mine")
        #expect(one.statistics.remote?.damagedRecords == 1)
        one.close()
    }

    @Test("With a lease, concurrent misses on several machines run the loader once")
    func lease() async throws {
        let server = try await RedisServer()
        // Waiters wait for the holder's load for as long as a hang: however slow the machine, the
        // loader runs once (a waiter that gave up would run it again).
        let lease = Freshness(lease: LoadLease(holdFor: hangBound * 2, waitFor: hangBound))
        var machines: [(Cache<String, String>, TemporaryDirectory)] = []
        for _ in 0..<3 { machines.append(try await Self.machine(server, freshness: lease)) }
        let caches = machines.map(\.0)
        let runs = CountingLoader()
        let started = CountingLoader()
        // Each loader waits until every machine has asked, so all three overlap.
        let values = try await withThrowingTaskGroup(of: String.self) { group in
            for cache in caches {
                group.addTask {
                    started.runs.add(1, ordering: .relaxed)
                    return try await cache.value(forKey: "cold") {
                        runs.runs.add(1, ordering: .relaxed)
                        await waitFor("every machine asked") { started.runs.load(ordering: .relaxed) == 3 }
                        return "loaded"
                    }
                }
            }
            var values: [String] = []
            for try await value in group { values.append(value) }
            return values
        }
        #expect(values == ["loaded", "loaded", "loaded"])
        #expect(runs.runs.load(ordering: .relaxed) == 1)
        // (Another machine may take the lease after the holder let go, find the value and let go:
        // leases taken may be more than one; loads are one.)
        for cache in caches { cache.close() }
        for machine in machines { machine.1.remove() }
    }

    @Test("Redis down: get-or-loads still answer (from the loader), failures are counted, the circuit opens and closes")
    func redisDown() async throws {
        let server = try await RedisServer()
        let (one, d1) = try await Self.machine(server, timeout: .milliseconds(200), threshold: 3)
        defer { d1.remove() }
        one.insert("kept", forKey: "local")
        await Self.wait(one, "the write reached Redis") { $0.writes >= 1 }
        server.kill()
        let loader = CountingLoader()
        for index in 0..<10 {
            #expect(try await one.value(forKey: "cold\(index)", load: loader.load("v\(index)")) == "v\(index)")
        }
        #expect(one.value(forKey: "local") == "kept")
        #expect(loader.runs.load(ordering: .relaxed) == 10)
        let down = try #require(one.statistics.remote)
        #expect(down.failures >= 3)
        #expect(down.circuitOpenings >= 1)
        // Inserted while down: sent once Redis is back, and readable by another machine.
        one.insert("while-down", forKey: "late")
        try await server.restart()
        await Self.wait(one, "the circuit closed and the write made while down reached Redis") {
            !$0.isCircuitOpen && $0.writes >= 2
        }
        await Self.wait(one, "resubscribed: the memory tier is dropped") { $0.memoryTierDrops >= 1 }
        let (two, d2) = try await Self.machine(server)
        defer { d2.remove() }
        #expect(try await two.value(forKey: "late", load: loader.load("x")) == "while-down")
        one.close()
        two.close()
    }
}
#endif
