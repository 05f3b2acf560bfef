import Foundation
import Testing

@testable import LMDBCache

@Suite("Writes committed while a trim runs")
struct DiskCacheLimitsDuringTrimTests {
    @Test("writes committed between a trim's transactions are brought inside their limits before flush returns")
    func limitsHoldAfterFlush() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        var unlimited = DiskCache.Configuration()
        unlimited.automaticTrimming = false
        unlimited.clock = time.clock
        let old = try DiskCache(directory: dir.url, configuration: unlimited)
        defer { old.close() }
        for index in 0..<1_200 { try old.setData([1], forKey: "old\(index)") }
        try old.flush()
        time.advance(by: .seconds(3_600))
        var limited = DiskCache.Configuration(countLimit: 500)
        limited.automaticTrimming = false
        limited.clock = time.clock
        let disk = try DiskCache(directory: dir.url, configuration: limited)
        defer { disk.close() }
        let store = disk.store
        // An age trim of five transactions runs while 3,000 writes under a count limit are
        // queued: they commit between its transactions, and the age trim's plan knows nothing of
        // their limit.
        try store.env.writer.sync {
            for index in 0..<3_000 { try disk.setData([UInt8(truncatingIfNeeded: index)], forKey: "k\(index)") }
            let cutoff = time.clock.milliseconds - 1_800_000
            try store.trim(DiskStore.TrimPlan(accessedBefore: cutoff), now: time.clock.milliseconds)
        }
        try disk.flush()
        #expect(disk.totalCount <= 500, "the count limit holds once flush returns: \(disk.totalCount)")
        #expect(try disk.store.verify().isClean)
        #expect(disk.totalCount >= 400, "trimmed to the low-water mark, not emptied: \(disk.totalCount)")
        #expect(try old.data(forKey: "old0") == nil, "the age trim did its own work too")
    }

    @Test("an imported entry keeps its access time when its write commits in a later batch than the access")
    func importedAccessTimesKept() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let created: UInt64 = 1_700_000_000_000
        // 1,500 imports queue before the writer runs: the access times, buffered apart from the
        // writes, must wait for the batch that holds their entry's write.
        try disk.store.env.writer.sync {
            for index in 0..<1_500 {
                try disk.importEntry(
                    [1, 2, 3], forKey: Array("k\(index)".utf8), created: created,
                    accessed: created + 5_000 + UInt64(index),
                    expires: nil)
            }
        }
        try disk.flush()
        for index in [0, 999, 1_000, 1_499] {
            let entry = try #require(try disk.storedEntry(forKey: Array("k\(index)".utf8)))
            #expect(entry.accessed == created + 5_000 + UInt64(index), "k\(index)")
        }
        #expect(try disk.store.verify().isClean)
    }
}
