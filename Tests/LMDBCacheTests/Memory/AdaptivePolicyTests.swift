import Foundation
import Testing

@_spi(Diagnostics) @testable import LMDBCache

@Suite("Memory tier: the adaptive policy")
struct AdaptivePolicyTests {
    typealias Policy = MemoryCache<Int, Int>.Policy

    static func cache(
        _ policy: Policy, countLimit: Int? = nil, costLimit: Int? = nil, shards: Int = 1,
        log: RemovalLog<Int, Int>? = nil
    ) -> MemoryCache<Int, Int> {
        var configuration = MemoryCache<Int, Int>.Configuration(
            countLimit: countLimit, costLimit: costLimit, policy: policy)
        configuration.shards = shards
        configuration.automaticTrimming = false
        return MemoryCache(configuration: configuration, removalListener: log?.listener)
    }

    @Test("the default policy is adaptive; DESIGN.md's .lru spelling compiles")
    func defaults() {
        #expect(MemoryCache<String, [UInt8]>.Configuration(countLimit: 100_000).policy == .adaptive)
        let plain = MemoryCache<String, [UInt8]>(configuration: .init(countLimit: 100_000, policy: .lru))
        #expect(plain.configuration.policy == .lru)
    }

    @Test(
        "a scan of one-hit keys does not evict a read-often set under .adaptive; under .lru it does",
        arguments: [Policy.adaptive, .lru])
    func scanResistance(policy: Policy) {
        let cache = Self.cache(policy, countLimit: 100)
        let hot = 0..<50
        for key in hot { cache[key] = key }
        for _ in 0..<20 {
            for key in hot { #expect(cache[key] == key) }
        }
        for key in 1_000..<2_000 { cache[key] = key }  // ten times the capacity, once each
        let survivors = hot.filter { cache.contains($0) }.count
        #expect(cache.totalCount == 100)
        if policy == .adaptive {
            #expect(survivors == hot.count, "the scan evicted \(hot.count - survivors) hot keys")
        } else {
            #expect(survivors == 0)
        }
    }

    @Test("a value read right after its insert is that value", arguments: [Policy.adaptive, .lru])
    func readYourWrites(policy: Policy) {
        var random = PowerLossRandom(seed: 3)
        let cache = Self.cache(policy, countLimit: 40, costLimit: 4_000, shards: 4)
        for step in 0..<20_000 {
            let key = Int(random.next() % 300)
            // Costs up to a shard's share of the cost limit: anything more never stays.
            cache.insert(step, forKey: key, cost: Int(random.next() % 1_001))
            #expect(cache[key] == step, "step \(step): key \(key)")
            if step % 3 == 0 { _ = cache[Int(random.next() % 300)] }
        }
    }

    @Test(
        "limits hold after every insert, and a value read is the last one inserted (random, against a model)",
        arguments: [Policy.adaptive, .lru], [1, 4])
    func limitsAgainstModel(policy: Policy, shards: Int) {
        var random = PowerLossRandom(seed: 0xADA7 &+ UInt64(shards))
        let countLimit = 64
        let costLimit = 5_000
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(policy, countLimit: countLimit, costLimit: costLimit, shards: shards, log: log)
        var model: [Int: Int] = [:]
        for step in 0..<30_000 {
            // Skewed keys (a few hot, many cold), so admission has something to decide.
            let draw = random.next() % 1_000
            let key = draw < 600 ? Int(draw % 20) : Int(random.next() % 2_000)
            switch random.next() % 10 {
            case 0..<4:
                let cost: Int
                switch random.next() % 50 {
                case 0: cost = .max
                case 1: cost = costLimit / shards + 1
                default: cost = Int(random.next() % 300)
                }
                cache.insert(step, forKey: key, cost: cost)
                model[key] = cost > costLimit / shards ? nil : step
                #expect(cache.totalCount <= countLimit, "step \(step)")
                #expect(cache.totalCost <= costLimit, "step \(step)")
            case 4:
                cache.removeValue(forKey: key)
                model[key] = nil
            default:
                let value = cache[key]
                #expect(value == nil || value == model[key], "step \(step): key \(key) gave \(value!)")
            }
        }
        #expect(cache.totalCount > countLimit / 2 || cache.totalCost > costLimit / 2, "the cache fills")
        let reasons = Set(log.reasons.map(\.1))
        #expect(reasons.isSubset(of: [.count, .cost, .replaced, .explicit]))
    }

    @Test("a cost limit of Int.max with entries costing Int.max does not trap", arguments: [Policy.adaptive, .lru])
    func extremeCosts(policy: Policy) {
        let cache = Self.cache(policy, countLimit: 8, costLimit: .max, shards: 2)
        for key in 0..<100 {
            cache.insert(key, forKey: key, cost: key % 3 == 0 ? .max : key)
            #expect(cache[key] == key)
        }
        #expect(cache.totalCount <= 8)
        #expect(cache.totalCost == .max)
    }

    @Test("a candidate that loses the admission contest is evicted with reason .count")
    func rejectedCandidateByCount() {
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(.adaptive, countLimit: 10, log: log)
        let hot = 0..<6
        for key in hot { cache[key] = key }
        for _ in 0..<5 {
            for key in hot { _ = cache[key] }
        }
        // New keys fill the shard, then leave the window one by one and lose to the hot keys.
        for key in 100..<120 { cache[key] = key }
        let rejected = log.reasons.filter { $0.1 == .count }.map(\.0)
        #expect(!rejected.isEmpty)
        #expect(rejected.allSatisfy { $0 >= 100 && cache[$0] == nil })
        #expect(!log.reasons.contains { hot.contains($0.0) }, "no hot key was evicted")
        #expect(hot.allSatisfy { cache[$0] == $0 })
        #expect(cache[119] == 119, "the newest stays")
        #expect(cache.totalCount == 10)
    }

    @Test("a candidate that loses the admission contest is evicted with reason .cost")
    func rejectedCandidateByCost() {
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(.adaptive, costLimit: 100, log: log)
        let hot = 0..<6
        for key in hot { cache.insert(key, forKey: key, cost: 10) }
        for _ in 0..<5 {
            for key in hot { _ = cache[key] }
        }
        // Each new key costs 15: once the shard is full it needs two victims' room, and must
        // beat both.
        for key in 100..<120 {
            cache.insert(key, forKey: key, cost: 15)
            #expect(cache.totalCost <= 100)
        }
        let rejected = log.reasons.filter { $0.1 == .cost }.map(\.0)
        #expect(!rejected.isEmpty)
        #expect(rejected.allSatisfy { $0 >= 100 && cache[$0] == nil })
        #expect(!log.reasons.contains { hot.contains($0.0) }, "no hot key was evicted")
        #expect(cache[119] == 119, "the newest stays")
    }

    /// Replays `keys` (a lookup, and an insert on a miss) through one adaptive shard of 200 entries
    /// with a fixed sketch seed and tags, so the run is the same every time; returns where the
    /// window's share ended.
    static func windowShare(seed: UInt64, requests: Int, _ key: (inout PowerLossRandom, Int) -> Int) -> Double {
        var shard = MemoryShard<Int, Int>(limits: .init(count: 200, cost: nil, age: nil), adaptive: true, seed: seed)
        var random = PowerLossRandom(seed: seed)
        var removed = RemovedEntries<Int, Int>()
        for step in 0..<requests {
            let key = key(&random, step)
            let tag = UInt32(truncatingIfNeeded: key)
            if shard.value(forKey: key, tag: tag, now: 0, removed: &removed) == nil {
                shard.insert(key, forKey: key, tag: tag, cost: 0, expires: 0, now: 0, removed: &removed)
            }
            removed = RemovedEntries()
        }
        return shard.windowShare
    }

    @Test("a recency-heavy workload grows the window", arguments: [1, 2, 3, 4] as [UInt64])
    func recencyGrowsTheWindow(seed: UInt64) {
        // A working set of 150 keys sliding forward one key every two requests: each key is
        // popular for a while, then never read again. The main area fills with keys popular
        // before; the more the window holds, the more of the current set is cached.
        let share = Self.windowShare(seed: seed, requests: 100_000) { random, step in
            step / 2 + Int(random.next() % 150)
        }
        #expect(share > AdaptiveWindow.initialShare + 0.3, "window share \(share)")
    }

    @Test("a frequency-heavy workload shrinks the window", arguments: [1, 2, 3, 4] as [UInt64])
    func frequencyShrinksTheWindow(seed: UInt64) {
        // Three requests in four go to 180 popular keys, the fourth to a key read once: the
        // smaller the window, the more of the popular keys the main area holds.
        let share = Self.windowShare(seed: seed, requests: 100_000) { random, step in
            step % 4 != 0 ? Int(random.next() % 180) : 1_000_000 + step
        }
        #expect(share < AdaptiveWindow.initialShare / 2, "window share \(share)")
    }

    @Test("a new cache's window starts at its initial share")
    func initialShare() {
        #expect(Self.cache(.adaptive, countLimit: 200).windowShares == [AdaptiveWindow.initialShare])
        #expect(Self.cache(.lru, countLimit: 200).windowShares == [1])
    }

    @Test("a disk hit promoted into memory counts as an access of its key")
    func diskHitIsAnAccess() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = Cache<String, String>.Configuration(memory: .init(countLimit: 100))
        configuration.memory.shards = 1
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer { cache.close() }
        cache["k"] = "v"
        cache.memory.removeValue(forKey: "k")  // on disk only now
        let before = cache.memory.estimatedFrequency(of: "k")
        #expect(cache["k"] == "v")
        #expect(cache.memory.contains("k"), "promoted")
        // The memory tier's miss and the promotion both count.
        #expect(cache.memory.estimatedFrequency(of: "k") >= before + 2)
    }

    @Test("each cache seeds its sketches at random, so colliding keys differ between instances")
    func sketchSeeds() {
        let first = Self.cache(.adaptive, countLimit: 1_000, shards: 4).sketchSeeds
        let second = Self.cache(.adaptive, countLimit: 1_000, shards: 4).sketchSeeds
        #expect(Set(first + second).count == 8)
        #expect(Self.cache(.lru, countLimit: 1_000).sketchSeeds == [0], ".lru keeps no sketch")
    }

    @Test("warm candidates that lose are still admitted now and then (flooding defence)")
    func warmCandidatesSometimesAdmitted() {
        var shard = MemoryShard<Int, Int>(limits: .init(count: 10, cost: nil, age: nil), adaptive: true, seed: 77)
        // A sketch that does not halve within the test, so the frequencies stay as set.
        shard.sketch = FrequencySketch(capacity: FrequencySketch.maximumCapacity, seed: 77)
        var removed = RemovedEntries<Int, Int>()
        func insert(_ key: Int) {
            shard.insert(key, forKey: key, tag: UInt32(key), cost: 0, expires: 0, now: 0, removed: &removed)
        }
        // The main area: ten keys at the counters' ceiling.
        for key in 0..<10 {
            insert(key)
            for _ in 0..<15 { shard.sketch.increment(UInt32(key)) }
        }
        // Candidates seen 7 times (warm, but below every main entry) meet the contest as the next
        // insert pushes them out of the window.
        var admitted = 0
        var filler = 1_000_000
        for candidate in 100..<4_100 {
            for _ in 0..<6 { shard.sketch.increment(UInt32(candidate)) }
            insert(candidate)
            // Keys seen once (they always lose) push the candidate out of the window.
            while let index = shard.find(candidate, tag: UInt32(candidate)), shard.nodes[Int(index)].segment == .window
            {
                insert(filler)
                filler += 1
            }
            if shard.contains(candidate, tag: UInt32(candidate), now: 0) { admitted += 1 }
        }
        // One in 128 of 4,000: about 31.
        #expect(admitted > 5 && admitted < 100, "admitted \(admitted)")
        #expect(shard.count <= 10)
    }
}
