import Foundation
import ServiceLifecycle
import ServiceLifecycleTestKit
import Testing

@testable import LMDBCache

@Suite("Trimming scheduler")
struct TrimSchedulerTests {
    @Test("the memory tier's scheduler alone removes idle and expired entries")
    func memoryAgeAndExpiry() throws {
        let clock = ManualClock()
        let log = RemovalLog<String, Int>()
        var configuration = MemoryCache<String, Int>.Configuration(
            ageLimit: .seconds(60), autoTrimInterval: .milliseconds(5))
        configuration.clock = clock.clock
        let cache = MemoryCache<String, Int>(configuration: configuration, removalListener: log.listener)
        for i in 0..<3_000 { cache.insert(i, forKey: "idle\(i)") }
        cache.insert(1, forKey: "ttl", expiresAfter: .seconds(10))
        let scheduler = try #require(cache.trimScheduler)
        clock.advance(by: .seconds(30))
        cache["fresh"] = 2
        scheduler.waitForFullPass()
        #expect(cache.totalCount == 3_001, "only the expired entry went")
        clock.advance(by: .seconds(31))  // the idle entries: 61 s; fresh: 31 s
        scheduler.waitForFullPass()
        #expect(cache.totalCount == 1)
        #expect(cache.contains("fresh"))
        let reasons = Dictionary(grouping: log.all, by: \.reason).mapValues(\.count)
        #expect(reasons == [.expired: 1, .age: 3_000])
    }

    @Test("the disk tier's scheduler alone removes idle entries and trims count and cost to the low-water mark")
    func diskLimits() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        do {
            var unlimited = DiskCache.Configuration()
            unlimited.clock = clock.clock
            unlimited.automaticTrimming = false
            let writer = try DiskCache(directory: dir.url, configuration: unlimited)
            for i in 0..<200 {
                clock.advance(by: .milliseconds(1))  // distinct access times: LRU order is k0, k1, ...
                try writer.setData(sampleBytes(count: 300, compressible: false, seed: UInt64(i)), forKey: "k\(i)")
            }
            try writer.flush()
            writer.close()
        }
        var configuration = DiskCache.Configuration(
            countLimit: 100, ageLimit: .seconds(600), autoTrimInterval: .milliseconds(5))
        configuration.lowWaterMark = 0.8
        configuration.clock = clock.clock
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let scheduler = try #require(disk.trimScheduler)
        scheduler.waitForFullPass()
        #expect(disk.totalCount == 80, "count trimmed to 80% of 100")
        #expect(try disk.containsData(forKey: "k199"), "the most recently used stay")
        #expect(try !disk.containsData(forKey: "k0"))

        let cost = disk.totalCost
        disk.close()
        var byCost = configuration
        byCost.countLimit = nil
        byCost.costLimit = cost / 2
        let second = try DiskCache(directory: dir.url, configuration: byCost)
        defer { second.close() }
        try #require(second.trimScheduler).waitForFullPass()
        #expect(second.totalCost <= Int(Double(cost / 2) * 0.8))
        #expect(second.totalCost > Int(Double(cost / 2) * 0.8) - 1_000, "no more than needed")

        clock.advance(by: .seconds(601))
        try second.setData([1], forKey: "fresh")
        try #require(second.trimScheduler).waitForFullPass()
        #expect(second.totalCount == 1)
        #expect(try second.data(forKey: "fresh") == [1])
    }

    @Test("close stops the schedulers; a tier can run without one")
    func stopsOnClose() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = Cache<String, String>.Configuration()
        configuration.memory.autoTrimInterval = .milliseconds(5)
        configuration.disk.autoTrimInterval = .milliseconds(5)
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        let memory = try #require(cache.memory.trimScheduler)
        let disk = try #require(cache.disk?.trimScheduler)
        memory.waitForFullPass()
        disk.waitForFullPass()
        cache.close()
        #expect(!memory.isRunning)
        #expect(!disk.isRunning)
        let passes = (memory.completedPasses, disk.completedPasses)
        // A stopped scheduler's timer is cancelled: nothing can add a pass after stop() returns.
        #expect((memory.completedPasses, disk.completedPasses) == passes)

        var manual = MemoryCache<Int, Int>.Configuration()
        manual.automaticTrimming = false
        #expect(MemoryCache<Int, Int>(configuration: manual).trimScheduler == nil)
    }

    @Test("as a Service: trims until graceful shutdown, then flushes and closes the cache")
    func service() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = Cache<String, String>.Configuration(
            memory: .init(ageLimit: .seconds(60), autoTrimInterval: .milliseconds(5)),
            disk: .init(ageLimit: .seconds(60), autoTrimInterval: .milliseconds(5)))
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.clock = clock.clock
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        #expect(cache.memory.trimScheduler == nil && cache.disk?.trimScheduler == nil)
        cache["old"] = "o"
        try cache.flush()
        clock.advance(by: .seconds(61))
        cache.insert("queued", forKey: "new")
        try await testGracefulShutdown { trigger in
            var service = CacheTrimmingService(cache: cache)
            let (passes, continuation) = AsyncStream.makeStream(of: CacheTier.self)
            service.passCompleted = { continuation.yield($0) }
            let running = Task { [service] in try await service.run() }
            // Every pass starts after the clock moved: one pass of each tier removes the idle entry
            // from both, without any call (the disk pass commits the queued write first).
            var tiers = Set<CacheTier>()
            for await tier in passes {
                tiers.insert(tier)
                if tiers == [.memory, .disk] { break }
            }
            #expect(cache.memory.totalCount == 1 && cache.memory.contains("new"), "the service trimmed memory")
            #expect(cache.disk!.totalCount == 1, "the service trimmed the disk")
            #expect(try cache.disk!.containsData(forKey: "new") && !cache.disk!.containsData(forKey: "old"))
            trigger.triggerGracefulShutdown()
            try await running.value
        }
        #expect(throws: CacheError.closed) { try cache.flush() }
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        #expect(try reopened.data(forKey: "new") == Array("queued".utf8), "flushed at shutdown")
        #expect(try reopened.containsData(forKey: "old") == false)
    }
}
