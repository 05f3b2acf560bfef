import Foundation
import Testing

@testable import LMDBCache

@Suite("Expiry and trimming")
struct DiskCacheExpiryAndTrimTests {
    static func open(
        _ dir: TemporaryDirectory, _ clock: ManualClock, _ edit: (inout DiskCache.Configuration) -> Void = { _ in }
    ) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.clock = clock.clock
        configuration.accessTimeGranularity = .zero
        edit(&configuration)
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    @Test("an entry is returned until its expiry and never after, even before it is trimmed")
    func perEntryExpiry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: "short", expiresAfter: .seconds(10))
        try disk.setData([2], forKey: "forever")
        #expect(try disk.data(forKey: "short") == [1], "queued, not expired")
        clock.advance(by: .seconds(11))
        #expect(try disk.data(forKey: "short") == nil, "queued, expired")
        try disk.flush()
        #expect(try disk.data(forKey: "short") == nil, "committed, expired")
        #expect(try disk.containsData(forKey: "short") == false)
        #expect(disk.totalCount == 2, "expired but not yet trimmed")
        try disk.removeExpired()
        #expect(disk.totalCount == 1)
        #expect(try disk.data(forKey: "forever") == [2])
    }

    @Test("reading an entry does not extend its expiry")
    func accessDoesNotExtendExpiry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: "k", expiresAfter: .seconds(10))
        try disk.flush()
        for _ in 0..<9 {
            clock.advance(by: .seconds(1))
            #expect(try disk.data(forKey: "k") == [1])
        }
        try disk.flush()
        clock.advance(by: .seconds(2))
        #expect(try disk.data(forKey: "k") == nil)
    }

    @Test("trimming to a count removes the least recently used entries first")
    func trimToCountIsLRU() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        for index in 0..<10 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            clock.advance(by: .seconds(1))
        }
        try disk.flush()
        // k0 and k1 become the most recently used.
        _ = try disk.data(forKey: "k1")
        clock.advance(by: .seconds(1))
        _ = try disk.data(forKey: "k0")
        try disk.trim(toCount: 4)
        let left = (0..<10).filter { (try? disk.containsData(forKey: "k\($0)")) == true }
        #expect(left == [0, 1, 8, 9])
        #expect(disk.totalCount == 4)
    }

    @Test("trimming to a cost removes least recently used entries until the bytes fit")
    func trimToCost() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock) { $0.compressionThreshold = nil }
        defer { disk.close() }
        for index in 0..<10 {
            try disk.setData([UInt8](repeating: 1, count: 100), forKey: "k\(index)")
            clock.advance(by: .seconds(1))
        }
        try disk.flush()
        let entry = Record.headerSize + 2 + 100
        #expect(disk.totalCost == 10 * entry)
        try disk.trim(toCost: 3 * entry + 10)
        #expect(disk.totalCount == 3)
        #expect(try disk.containsData(forKey: "k9"))
        #expect(try !disk.containsData(forKey: "k6"))
    }

    @Test("trimming to an age removes entries not accessed within it")
    func trimToAge() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: "old")
        try disk.setData([2], forKey: "read")
        clock.advance(by: .seconds(50))
        try disk.setData([3], forKey: "new")
        _ = try disk.data(forKey: "read")
        clock.advance(by: .seconds(20))
        try disk.trim(toAge: .seconds(60))
        #expect(try !disk.containsData(forKey: "old"))
        #expect(try disk.containsData(forKey: "read"))
        #expect(try disk.containsData(forKey: "new"))
    }

    @Test("a trim of many entries leaves indexes and totals consistent")
    func largeTrimStaysConsistent() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        for index in 0..<3_000 {
            try disk.setData(
                Array("value \(index)".utf8), forKey: "k\(index)", expiresAfter: index % 3 == 0 ? .seconds(5) : nil)
        }
        try disk.flush()
        clock.advance(by: .seconds(10))
        try disk.trim(toCount: 500)
        #expect(disk.totalCount == 500)
        let report = try disk.store.verify()
        #expect(report.isClean, "\(report.indexProblems)")
        #expect(report.expiryEntries == 0, "expired entries go first")
    }

    @Test("passing the count limit on write trims down to the low-water mark")
    func limitOnWriteTrimsToLowWater() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock) {
            $0.countLimit = 100
            $0.lowWaterMark = 0.5
        }
        defer { disk.close() }
        for index in 0..<100 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            clock.advance(by: .milliseconds(10))
        }
        try disk.flush()
        #expect(disk.totalCount == 100, "at the limit, not over it: nothing trimmed")
        try disk.setData([1], forKey: "one more")
        try disk.flush()
        #expect(disk.totalCount == 50)
        #expect(try disk.containsData(forKey: "one more"))
        #expect(try !disk.containsData(forKey: "k0"))
    }

    @Test("an access noted before the entry is overwritten or removed leaves the indexes consistent")
    func staleAccessIsDropped() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        for index in 0..<3 { try disk.setData([UInt8(index)], forKey: "k\(index)") }
        try disk.flush()
        clock.advance(by: .seconds(5))
        for index in 0..<3 { _ = try disk.data(forKey: "k\(index)") }
        // The reads' access times are still buffered when k0 changes and k1 goes.
        try disk.setData([9], forKey: "k0")
        try disk.removeData(forKey: "k1")
        try disk.flush()
        let report = try disk.store.verify()
        #expect(report.isClean, "\(report.indexProblems)")
        #expect(disk.totalCount == 2)
        // k2's access was recorded: it outlives k0, written before it at the same time.
        clock.advance(by: .seconds(1))
        _ = try disk.data(forKey: "k2")
        try disk.trim(toCount: 1)
        #expect(try disk.containsData(forKey: "k2"))
    }

    @Test("a value larger than the cost limit is refused")
    func valueOverCostLimit() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url, configuration: .init(costLimit: 1_000))
        defer { disk.close() }
        let value = sampleBytes(count: 2_000, compressible: false)
        #expect(throws: CacheError.valueTooLarge(size: Record.headerSize + 3 + 2_000, limit: 1_000)) {
            try disk.setData(value, forKey: "big")
        }
        #expect(try disk.data(forKey: "big") == nil)
    }
}
