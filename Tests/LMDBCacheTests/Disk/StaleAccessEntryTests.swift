import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("Disk access index: overwrites and recorded uses leave stale entries; sweeps bound them")
struct StaleAccessEntryTests {
    /// A disk cache on `clock` that records every read's use, trimmed only when a test says so.
    static func open(_ dir: TemporaryDirectory, _ clock: ManualClock) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        configuration.accessTimeGranularity = .zero
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    @Test("stale entries stay under the live ones plus the allowance, and no live entry is swept")
    func sweepsBoundStaleEntries() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let keys = (0..<200).map { Array("key\($0)".utf8) }
        var random = PowerLossRandom(seed: 7)
        var mostStale = 0
        // Without sweeps the 40 rounds would leave about 40 × 300 stale entries.
        for round in 0..<40 {
            for key in keys {
                clock.advance(by: .milliseconds(1))
                try disk.setData(Array("\(round)".utf8) + key, forKey: key)
            }
            try disk.flush()
            for _ in 0..<100 {
                clock.advance(by: .milliseconds(1))
                let key = keys[Int(random.next() % UInt64(keys.count))]
                #expect(try disk.data(forKey: key) == Array("\(round)".utf8) + key)
            }
            try disk.flush()
            let report = try disk.store.verify()
            #expect(report.indexProblems.isEmpty, "round \(round): \(report.indexProblems)")
            #expect(report.isClean, "round \(round): \(report.problems)")
            #expect(report.accessEntries - report.staleAccessEntries == keys.count)
            mostStale = max(mostStale, report.staleAccessEntries)
        }
        #expect(mostStale > 0, "overwrites leave their old access entries behind")
        #expect(
            mostStale <= DiskStore.staleAccessAllowance + 2 * keys.count,
            "the sweeps keep the stale entries near the allowance (at most \(mostStale))")
    }

    @Test("trimming evicts least recently used first, past the stale entries of overwritten and read keys")
    func trimOrderPastStaleEntries() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        func key(_ index: Int) -> [UInt8] { Array("k\(index)".utf8) }
        for index in 0..<8 {
            clock.advance(by: .milliseconds(10))
            try disk.setData([UInt8(index)], forKey: key(index))
        }
        try disk.flush()
        // Use order, oldest first: k4 k5 k6 k7 (written), k0 k1 (rewritten), k2 k3 (read).
        for index in [0, 1] {
            clock.advance(by: .milliseconds(10))
            try disk.setData([UInt8(index), 1], forKey: key(index))
        }
        try disk.flush()
        for index in [2, 3] {
            clock.advance(by: .milliseconds(10))
            _ = try disk.data(forKey: key(index))
        }
        try disk.flush()
        var oldest = try disk.store.statistics(now: clock.clock.milliseconds).oldestAccess
        #expect(oldest == 1_800_000_000_000 + 50, "k4's write, not the stale entries of k0..k3 before it")
        try disk.trim(toCount: 4)
        for index in 0..<8 {
            let kept = try disk.containsData(forKey: key(index))
            #expect(kept == (index < 4), "k\(index) \(kept ? "kept" : "evicted")")
        }
        oldest = try disk.store.statistics(now: clock.clock.milliseconds).oldestAccess
        #expect(oldest == 1_800_000_000_000 + 90, "k0's rewrite")
        #expect(try disk.store.verify().isClean)
    }

    @Test("after every key is rewritten, the oldest access is the oldest rewrite, not a stale entry")
    func oldestAccessAfterFullRewrite() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        let keys = (0..<100).map { Array("key\($0)".utf8) }
        for key in keys {
            clock.advance(by: .milliseconds(1))
            try disk.setData(key, forKey: key)
        }
        try disk.flush()
        clock.advance(by: .seconds(10))
        let rewrite = clock.clock.milliseconds
        for key in keys {
            clock.advance(by: .milliseconds(1))
            try disk.setData(key + key, forKey: key)
        }
        try disk.flush()
        // The oldest access sets the precision reads record uses with: a stale day-old entry
        // would make it coarse.
        #expect(try disk.store.statistics(now: clock.clock.milliseconds).oldestAccess == rewrite + 1)
        #expect(disk.store.oldestAccess.load(ordering: .relaxed) == rewrite + 1)
    }

    @Test("an emptied store has no access range, though stale entries may remain")
    func emptiedStoreHasNoAccessRange() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: Array("k".utf8))
        try disk.flush()
        clock.advance(by: .seconds(5))
        _ = try disk.data(forKey: Array("k".utf8))
        try disk.flush()
        try disk.removeData(forKey: Array("k".utf8))
        try disk.flush()
        let statistics = try disk.store.statistics(now: clock.clock.milliseconds)
        #expect(statistics.entries == 0)
        #expect(statistics.oldestAccess == nil && statistics.newestAccess == nil)
    }

    @Test("damaged access index keys (too short to hold a time and a key) fail no open, batch, trim or sweep")
    func damagedShortIndexKeys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        do {
            let disk = try Self.open(dir, clock)
            for index in 0..<8 { try disk.setData([UInt8(index)], forKey: Array("k\(index)".utf8)) }
            try disk.flush()
            let store = disk.store
            try store.env.writer.sync {
                try store.env.write { txn in
                    for damaged: [UInt8] in [[0, 0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 2], [0]] {
                        try txn.put(store.db.access, damaged, [])
                    }
                }
            }
            disk.close()
        }
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        // More than the allowance of stale entries, so the batches sweep too.
        for round in 0..<8 {
            for index in 0..<200 {
                clock.advance(by: .milliseconds(1))
                try disk.setData([UInt8(round)], forKey: Array("r\(index)".utf8))
            }
            try disk.flush()
        }
        #expect(try disk.data(forKey: Array("r7".utf8)) == [7])
        try disk.trim(toCount: 100)
        #expect(disk.totalCount == 100)
        let report = try disk.store.verify()
        #expect(report.indexProblems.isEmpty && report.damaged.isEmpty, "\(report.problems)")
        #expect(report.accessEntries - report.staleAccessEntries == 100)
    }
}
