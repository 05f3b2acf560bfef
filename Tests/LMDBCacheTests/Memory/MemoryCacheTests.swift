import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

@Suite("Memory tier")
struct MemoryCacheTests {
    /// One shard, so LRU order is exact across all keys.
    static func cache(
        _ clock: ManualClock = ManualClock(), log: RemovalLog<String, Int>? = nil,
        _ edit: (inout MemoryCache<String, Int>.Configuration) -> Void
    ) -> MemoryCache<String, Int> {
        var configuration = MemoryCache<String, Int>.Configuration()
        configuration.shards = 1
        configuration.clock = clock.clock
        edit(&configuration)
        return MemoryCache(configuration: configuration, removalListener: log?.listener)
    }

    @Test("a value inserted is returned; nil assignment and removeValue remove it")
    func roundTrip() {
        let cache = MemoryCache<String, Int>()
        cache["a"] = 1
        cache.insert(2, forKey: "b", cost: 5)
        #expect(cache["a"] == 1)
        #expect(cache.value(forKey: "b") == 2)
        #expect(cache.contains("b"))
        #expect(cache.totalCount == 2)
        #expect(cache.totalCost == 5)
        cache["a"] = nil
        #expect(cache.removeValue(forKey: "b") == 2)
        #expect(cache.removeValue(forKey: "b") == nil)
        #expect(cache["a"] == nil)
        #expect(cache.totalCount == 0)
        #expect(cache.totalCost == 0)
    }

    @Test("over the count limit the least recently used entry goes, and a read makes an entry recent")
    func lruOrder() {
        let log = RemovalLog<String, Int>()
        let cache = Self.cache(log: log) {
            $0.countLimit = 3
            $0.policy = .lru
        }
        cache["a"] = 1
        cache["b"] = 2
        cache["c"] = 3
        #expect(cache["a"] == 1)  // order now b, c, a
        cache["d"] = 4
        #expect(cache["b"] == nil, "b was least recently used")
        #expect(cache.contains("c") == true)
        cache["c"] = 30  // an overwrite is a use too: order a, d, c
        cache["e"] = 5
        #expect(cache["a"] == nil)
        #expect(cache["c"] == 30)
        #expect(cache.totalCount == 3)
        #expect(log.reasons.map(\.0) == ["b", "c", "a"])
        #expect(log.reasons.map(\.1) == [.count, .replaced, .count])
        #expect(log.all[1].value == 3, "the listener gets the replaced value")
    }

    @Test("contains is not an access")
    func containsIsNotAnAccess() {
        let cache = Self.cache {
            $0.countLimit = 2
            $0.policy = .lru
        }
        cache["a"] = 1
        cache["b"] = 2
        #expect(cache.contains("a"))
        cache["c"] = 3
        #expect(!cache.contains("a"))
    }

    @Test("the cost limit holds after every insert, counting given costs or the weigher's")
    func costLimit() {
        let log = RemovalLog<String, Int>()
        let cache = Self.cache(log: log) {
            $0.costLimit = 100
            $0.weigher = { $0 }
            $0.policy = .lru
        }
        cache.insert(1, forKey: "a", cost: 40)
        cache.insert(2, forKey: "b", cost: 40)
        cache.insert(30, forKey: "c")  // weighs 30
        #expect(cache.totalCost == 70)
        #expect(cache["a"] == nil)
        #expect(log.reasons.map(\.1) == [.cost])
        cache.insert(1_000, forKey: "huge")
        #expect(cache["huge"] == nil, "an entry costlier than the limit does not stay")
        #expect(cache["c"] == 30, "and evicts nothing else")
        #expect(log.all.last?.reason == .cost && log.all.last?.value == 1_000)
        for i in 0..<50 {
            cache.insert(i, forKey: "k\(i)", cost: i % 7 * 10)
            #expect(cache.totalCost <= 100)
        }
    }

    @Test("every limit holds across shards after every insert")
    func limitsAcrossShards() {
        var configuration = MemoryCache<Int, Int>.Configuration(countLimit: 1_000, costLimit: 50_000)
        configuration.shards = 16
        let cache = MemoryCache<Int, Int>(configuration: configuration)
        for i in 0..<10_000 {
            cache.insert(i, forKey: i, cost: i % 100)
            if i % 97 == 0 {
                #expect(cache.totalCount <= 1_000)
                #expect(cache.totalCost <= 50_000)
            }
        }
        #expect(cache.totalCount <= 1_000)
        #expect(cache.totalCount > 500, "shards share the capacity evenly")
    }

    @Test("an entry idle past the age limit is gone; reading it resets its age (YYCache's meaning)")
    func ageLimit() {
        let clock = ManualClock()
        let log = RemovalLog<String, Int>()
        let cache = Self.cache(clock, log: log) { $0.ageLimit = .seconds(60) }
        cache["read"] = 1
        cache["idle"] = 2
        clock.advance(by: .seconds(50))
        #expect(cache["read"] == 1)
        clock.advance(by: .seconds(50))  // read: 50 s idle; idle: 100 s
        #expect(cache["read"] == 1)
        #expect(cache.contains("idle") == false)
        #expect(cache["idle"] == nil)
        #expect(log.reasons.map(\.1) == [.age])
    }

    @Test("an insert evicts entries idle past the age limit, oldest first")
    func ageLimitOnInsert() {
        let clock = ManualClock()
        let cache = Self.cache(clock) { $0.ageLimit = .seconds(60) }
        cache["old1"] = 1
        cache["old2"] = 2
        clock.advance(by: .seconds(61))
        cache["new"] = 3
        #expect(cache.totalCount == 1)
    }

    @Test("expiresAfter is absolute: reading does not extend it (PINCache's TTL)")
    func perEntryExpiry() {
        let clock = ManualClock()
        let log = RemovalLog<String, Int>()
        let cache = Self.cache(clock, log: log) { $0.ageLimit = .seconds(1_000) }
        cache.insert(1, forKey: "ttl", expiresAfter: .seconds(10))
        cache.insert(2, forKey: "plain")
        for _ in 0..<9 {
            clock.advance(by: .seconds(1))
            #expect(cache["ttl"] == 1)
        }
        clock.advance(by: .seconds(1))
        #expect(cache["ttl"] == nil, "expired at 10 s although read every second")
        #expect(cache["plain"] == 2)
        #expect(log.reasons.map(\.1) == [.expired])
    }

    @Test("an expired entry is never returned, even before it is removed")
    func expiredNotReturned() {
        let clock = ManualClock()
        let cache = Self.cache(clock) { _ in }
        cache.insert(1, forKey: "a", expiresAfter: .seconds(5))
        clock.advance(by: .seconds(5))
        #expect(cache.contains("a") == false)
        #expect(cache.totalCount == 1, "still stored until removed")
        cache.removeExpired()
        #expect(cache.totalCount == 0)
    }

    @Test("trim to count, cost and age removes expired entries, then the least recently used")
    func trims() {
        let clock = ManualClock()
        let log = RemovalLog<String, Int>()
        let cache = Self.cache(clock, log: log) { _ in }
        for i in 0..<10 { cache.insert(i, forKey: "k\(i)", cost: 10) }
        cache.insert(99, forKey: "ttl", cost: 10, expiresAfter: .seconds(1))
        clock.advance(by: .seconds(2))
        cache.trim(toCount: 8)
        #expect(cache.totalCount == 8)
        #expect(log.reasons.map(\.0) == ["ttl", "k0", "k1"])
        #expect(log.reasons.map(\.1) == [.expired, .count, .count])
        cache.trim(toCost: 50)
        #expect(cache.totalCost == 50)
        #expect(cache["k4"] == nil && cache["k5"] == 5)
        clock.advance(by: .seconds(100))
        cache["k9"] = 9  // used now
        cache.trim(toAge: .seconds(50))
        #expect(cache.totalCount == 1)
        #expect(cache["k9"] == 9)
        #expect(log.all.last?.reason == .age)
        cache.removeAll()
        #expect(cache.totalCount == 0 && cache.totalCost == 0)
        #expect(log.all.last?.reason == .explicit)
    }

    @Test("statistics count hits, misses and removals by reason")
    func statistics() {
        let cache = Self.cache { $0.countLimit = 1 }
        cache["a"] = 1
        _ = cache["a"]
        _ = cache["b"]
        cache["b"] = 2
        cache["b"] = 3
        cache.removeValue(forKey: "b")
        let statistics = cache.statistics
        #expect(statistics.hits == 1)
        #expect(statistics.misses == 1)
        #expect(statistics.removals == [.count: 1, .replaced: 1, .explicit: 1])
        #expect(statistics.evictions == 1)
    }

    @Test("removed values are released after the call returns, and the listener may call back in")
    func listenerMayReenter() {
        final class Payload: Sendable {}
        let seen = Locked<Int>(0)
        let cache = Locked<MemoryCache<Int, Payload>?>(nil)
        let memory = MemoryCache<Int, Payload>(configuration: .init(countLimit: 1)) { removal in
            // Re-entering the same shard would deadlock if the lock were still held.
            _ = cache.withLock { $0 }?.contains(removal.key)
            seen.withLock { $0 += 1 }
        }
        cache.withLock { $0 = memory }
        weak var first: Payload?
        do {
            let payload = Payload()
            first = payload
            memory.insert(payload, forKey: 1)
        }
        memory.insert(Payload(), forKey: 2)
        #expect(seen.withLock { $0 } == 1)
        #expect(first == nil, "the evicted value is not kept")
    }

    @Test("the default shard count follows the cores and falls for small limits")
    func shardCount() {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let unlimited = MemoryCache<Int, Int>.Configuration()
        #expect(unlimited.shardCount >= cores)
        #expect(unlimited.shardCount.nonzeroBitCount == 1)
        #expect(MemoryCache<Int, Int>.Configuration(countLimit: 10).shardCount == 1)
        #expect(MemoryCache<Int, Int>.Configuration(costLimit: 1 << 20).shardCount == 2)
        let large = MemoryCache<Int, Int>.Configuration(countLimit: 1_000_000, costLimit: 1 << 30)
        #expect(large.shardCount == unlimited.shardCount)
    }
}
