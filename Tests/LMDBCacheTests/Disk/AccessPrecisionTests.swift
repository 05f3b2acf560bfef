import Dispatch
import Foundation
import Testing

@testable import LMDBCache

@Suite("Disk access order: relative precision, writes per read")
struct AccessPrecisionTests {
    /// A disk cache on `clock`, trimmed only when a test says so.
    static func open(_ dir: TemporaryDirectory, _ clock: ManualClock) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    @Test("the threshold is an eighth of the span and of the age limit, at least the granularity, and never overflows")
    func thresholdBounds() {
        #expect(RecentAccesses.threshold(granularity: 1_000, span: 0, ageLimit: nil) == 1_000)
        #expect(RecentAccesses.threshold(granularity: 1_000, span: 80_000, ageLimit: nil) == 10_000)
        #expect(RecentAccesses.threshold(granularity: 1_000, span: 80_000, ageLimit: 16_000) == 2_000)
        #expect(RecentAccesses.threshold(granularity: 50_000, span: 80_000, ageLimit: 16_000) == 50_000)
        #expect(RecentAccesses.threshold(granularity: 0, span: .max, ageLimit: .max) == UInt64.max / 8)
        #expect(RecentAccesses.threshold(granularity: .max, span: .max, ageLimit: nil) == .max)
    }

    @Test(
        "a key's use is recorded once per threshold, a rewrite counts as a use, and keys sharing a slot only cost writes"
    )
    func recordsOncePerThreshold() throws {
        let table = RecentAccesses(stripes: 1, slotsPerStripe: 1)
        let a = try StorageKey(Array("a".utf8))
        let b = try StorageKey(Array("b".utf8))
        #expect(table.shouldRecord(a, created: 0, now: 5_000, threshold: 1_000))
        #expect(!table.shouldRecord(a, created: 0, now: 5_999, threshold: 1_000), "recorded 999 ms ago")
        #expect(table.shouldRecord(a, created: 0, now: 6_000, threshold: 1_000))
        #expect(!table.shouldRecord(a, created: 6_500, now: 7_000, threshold: 1_000), "written 500 ms ago")
        #expect(!table.shouldRecord(a, created: 0, now: 6_000, threshold: 1_000), "a clock that went back")
        // One slot: b pushes a out, and a's next read is recorded again (one more write, never fewer).
        #expect(table.shouldRecord(b, created: 0, now: 6_100, threshold: 1_000))
        #expect(table.shouldRecord(a, created: 0, now: 6_200, threshold: 1_000))
    }

    @Test(
        "after random reads, writes and clock moves, each entry's recorded use trails its last use by at most max(granularity, span / 8)",
        arguments: 0..<12)
    func recordedUseWithinBound(seed: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        var random = PowerLossRandom(seed: UInt64(seed))
        let keys = (0..<24).map { Array("key\($0)".utf8) }
        var lastUse: [[UInt8]: UInt64] = [:]
        let start = clock.clock.milliseconds
        for _ in 0..<400 {
            let key = keys[Int(random.next() % UInt64(keys.count))]
            let now = clock.clock.milliseconds
            switch random.next() % 10 {
            case 0..<6:
                if try disk.data(forKey: key) != nil { lastUse[key] = now }
            case 6..<8:
                try disk.setData([UInt8](repeating: 1, count: 10), forKey: key)
                lastUse[key] = now
            default:
                // Whole seconds: the manual clock's Double seconds then convert to exact milliseconds.
                clock.advance(by: .seconds(Int64(random.next() % 30)))
            }
            if random.next() % 25 == 0 { try disk.flush() }
        }
        try disk.flush()
        for (key, used) in lastUse {
            let entry = try #require(try disk.storedEntry(forKey: key))
            let bound = max(1_000, (used - start) / 8)
            #expect(
                entry.accessed <= used, "recorded use after the last use of \(String(decoding: key, as: UTF8.self))")
            #expect(
                entry.accessed + bound >= used,
                "\(String(decoding: key, as: UTF8.self)): last use \(used - start) ms, recorded \(entry.accessed - start) ms, bound \(bound) ms"
            )
        }
    }

    @Test("reads of one entry within the threshold queue one access update, not one per read")
    func oneUpdatePerThreshold() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: Array("k".utf8))
        try disk.flush()
        clock.advance(by: .seconds(10))
        for _ in 0..<100 { _ = try disk.data(forKey: Array("k".utf8)) }
        #expect(disk.store.state.withLock { $0.accessCount } == 1)
        try disk.flush()
        let afterOne = try #require(try disk.storedEntry(forKey: Array("k".utf8))).accessed
        #expect(afterOne == clock.clock.milliseconds)
        for _ in 0..<100 { _ = try disk.data(forKey: Array("k".utf8)) }
        #expect(disk.store.state.withLock { $0.accessCount } == 0, "recorded just now: nothing to record")
    }

    @Test("reads of a key rewritten while queued move its entry from the newest write's time, so the bound holds")
    func readsOfQueuedRewrites() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let key = Array("k".utf8)
        try disk.setData([1], forKey: key)
        try disk.flush()
        let release = DispatchSemaphore(value: 0)
        let held = DispatchSemaphore(value: 0)
        disk.store.env.writer.async {
            held.signal()
            release.wait()
        }
        held.wait()
        // The writer held: the writes and the reads' uses stay queued together.
        clock.advance(by: .seconds(10))
        try disk.setData([2], forKey: key)
        clock.advance(by: .seconds(10))
        _ = try disk.data(forKey: key)
        clock.advance(by: .seconds(1))
        try disk.setData([3], forKey: key)
        clock.advance(by: .seconds(10))
        let lastRead = clock.clock.milliseconds
        #expect(try disk.data(forKey: key) == [3])
        release.signal()
        try disk.flush()
        #expect(try disk.storedEntry(forKey: key)?.accessed == lastRead)
    }

    @Test(
        "a read looks again for the oldest entry once a second, so another process's trims do not leave the span stale")
    func spanRefreshedByReads() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let key = Array("k".utf8)
        try disk.setData([1], forKey: key)
        try disk.flush()
        _ = try disk.data(forKey: key)  // a read at the write's time: records nothing, looks at the span
        // As if the store's oldest entry were from 1970 and gone since, by another process's hand.
        disk.store.oldestAccess.store(1, ordering: .relaxed)
        clock.advance(by: .seconds(2))
        _ = try disk.data(forKey: key)
        try disk.flush()
        #expect(try disk.storedEntry(forKey: key)?.accessed == clock.clock.milliseconds, "span from k itself: 2 s")
    }
}
