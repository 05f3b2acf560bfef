import Foundation
import Testing

@testable import LMDBCache

/// `.seconds(Int64.max)` is how users write "forever"; no duration or limit may trap.
@Suite("Durations and limits at their extremes saturate, never trap")
struct ExtremeDurationTests {
    static let extremes: [Duration] = [
        .seconds(Int64.max), .seconds(Int64.max / 1_000), .seconds(Int64.max / 1_000 + 1),
        Duration(secondsComponent: Int64.max, attosecondsComponent: 999_999_999_999_999_999),
        .seconds(Int64.min), .milliseconds(-1), .zero,
    ]

    @Test("Duration.milliseconds saturates at UInt64.max and is 0 for negative durations")
    func millisecondsSaturate() {
        #expect(Duration.seconds(Int64.max).milliseconds == .max)
        #expect(Duration.seconds(Int64(UInt64.max / 1_000)).milliseconds == UInt64.max / 1_000 * 1_000)
        #expect(
            Duration(secondsComponent: Int64.max, attosecondsComponent: 999_999_999_999_999_999).milliseconds == .max)
        #expect(Duration.seconds(Int64.min).milliseconds == 0)
        #expect(Duration.milliseconds(1_500).milliseconds == 1_500)
    }

    @Test("a memory cache takes any age limit, expiry, trim age and trim interval")
    func memoryCacheExtremes() {
        let clock = ManualClock()
        for duration in Self.extremes {
            var configuration = MemoryCache<String, Int>.Configuration(
                ageLimit: duration > .zero ? duration : nil, autoTrimInterval: duration)
            configuration.clock = clock.clock
            let cache = MemoryCache<String, Int>(configuration: configuration)
            cache.insert(1, forKey: "forever", expiresAfter: .seconds(Int64.max))
            cache.insert(2, forKey: "given", expiresAfter: duration)
            #expect(cache.value(forKey: "forever") == 1, "\(duration)")
            #expect(cache.value(forKey: "given") == (duration > .zero ? 2 : nil), "\(duration): negative is expired")
            cache.trim(toAge: duration)
            _ = cache.trimPass()
            clock.advance(by: .seconds(86_400 * 365))
            #expect(cache.value(forKey: "forever") == 1, "\(duration): no expiry, an age limit of at least centuries")
        }
    }

    @Test("a memory cache takes entries costing Int.max, with no cost limit or a limit of .max; totals saturate")
    func memoryCostsAtIntMax() {
        var unlimited = MemoryCache<Int, Int>.Configuration()
        unlimited.automaticTrimming = false
        let cache = MemoryCache<Int, Int>(configuration: unlimited)
        for key in 0..<64 { cache.insert(key, forKey: key, cost: .max) }
        cache.insert(0, forKey: 0, cost: .max)
        #expect(cache.totalCount == 64)
        #expect(cache.totalCost == .max, "the sum saturates")
        _ = cache.statistics
        for key in 0..<63 { cache.removeValue(forKey: key) }
        #expect(cache.totalCost == .max, "one entry of Int.max left")
        cache.removeValue(forKey: 63)
        #expect(cache.totalCost == 0)
        for key in 0..<64 { cache.insert(key, forKey: key, cost: .max) }
        cache.trim(toCost: .max)
        #expect((1...cache.configuration.shardCount).contains(cache.totalCount), "at most Int.max per shard")

        var limited = MemoryCache<Int, Int>.Configuration(costLimit: .max)
        limited.automaticTrimming = false
        let bounded = MemoryCache<Int, Int>(configuration: limited)
        for key in 0..<64 {
            bounded.insert(key, forKey: key, cost: .max)
            #expect(bounded.value(forKey: key) == key, "an entry costing the limit fits")
            #expect(bounded.totalCost == .max)
        }
    }

    @Test("a trim interval of zero, a negative one or forever runs at the documented bounds")
    func schedulerIntervalBounds() {
        #expect(TrimScheduler.effectiveInterval(.zero) == TrimScheduler.minimumInterval)
        #expect(TrimScheduler.effectiveInterval(.seconds(-5)) == TrimScheduler.minimumInterval)
        #expect(TrimScheduler.effectiveInterval(.seconds(Int64.max)) == TrimScheduler.maximumInterval)
        #expect(TrimScheduler.effectiveInterval(.seconds(7)) == .seconds(7))
        let scheduler = TrimScheduler(tier: .memory, interval: .seconds(Int64.max), logger: .init(label: "test")) { 0 }
        scheduler.stop()
    }

    @Test("a disk cache takes any expiry and trim age; a negative expiry is already expired")
    func diskCacheExtremes() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        var configuration = DiskCache.Configuration(
            ageLimit: .seconds(Int64.max), autoTrimInterval: .seconds(Int64.max))
        configuration.clock = clock.clock
        configuration.accessTimeGranularity = .seconds(Int64.max)
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        for (index, duration) in Self.extremes.enumerated() {
            try disk.setData([UInt8(index)], forKey: "k\(index)", expiresAfter: duration)
            #expect(try disk.data(forKey: "k\(index)") == (duration > .zero ? [UInt8(index)] : nil), "\(duration)")
        }
        try disk.flush()
        try disk.trim(toAge: .seconds(Int64.max))
        try disk.trim(toAge: .seconds(Int64.min))
        disk.trimPass()
        #expect(try disk.data(forKey: "k0") == [0], "forever is still there")
        #expect(try disk.data(forKey: "k4") == nil, "Int64.min seconds: expired at once")
    }

    @Test("a disk cache with count and cost limits of Int.max trims without trapping, at any low-water mark")
    func diskLimitsAtMaximum() throws {
        for lowWaterMark in [1.0, 0.9, 0, .nan, .infinity, -1] {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            var configuration = DiskCache.Configuration(countLimit: .max, costLimit: .max)
            configuration.lowWaterMark = lowWaterMark
            let disk = try DiskCache(directory: dir.url, configuration: configuration)
            defer { disk.close() }
            try disk.setData([1], forKey: "k")
            try disk.flush()
            disk.trimPass()
            #expect(try disk.data(forKey: "k") == [1], "lowWaterMark \(lowWaterMark)")
            let targets = configuration.limits.lowWaterTargets
            #expect(targets.count! <= Int.max && targets.count! >= 0)
        }
        #expect(DiskLimits.fraction(1, of: .max) == .max)
        #expect(DiskLimits.fraction(.nan, of: 10) == 10)
        #expect(DiskLimits.fraction(0.5, of: -3) == 0)
    }
}
