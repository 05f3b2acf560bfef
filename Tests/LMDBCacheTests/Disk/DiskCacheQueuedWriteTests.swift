import Foundation
import Testing

@testable import LMDBCache

@Suite("Queued writes: limits after a trim commits them, access times of imports")
struct DiskCacheQueuedWriteTests {
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

    @Test("writes committed during a trim under a free-space limit evict as many bytes as they added, not the store")
    func freeSpaceFollowUpEvictsOnlyWhatWasAdded() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        var unlimited = DiskCache.Configuration()
        unlimited.automaticTrimming = false
        unlimited.clock = time.clock
        let plain = try DiskCache(directory: dir.url, configuration: unlimited)
        defer { plain.close() }
        for index in 0..<1_200 { try plain.setData([1], forKey: "old\(index)") }
        try plain.flush()
        time.advance(by: .seconds(3_600))
        for index in 0..<1_000 { try plain.setData([2], forKey: "recent\(index)") }
        try plain.flush()
        // A limit no volume meets: the volume is always short, by far more than the store holds.
        var limited = DiskCache.Configuration(freeSpaceLimit: 1 << 60)
        limited.automaticTrimming = false
        limited.clock = time.clock
        let disk = try DiskCache(directory: dir.url, configuration: limited)
        defer { disk.close() }
        let store = disk.store
        time.advance(by: .seconds(1))  // the new entries are the most recently used
        // 50 writes commit between the transactions of an age trim of the 1,200 old entries.
        try store.env.writer.sync {
            for index in 0..<50 { try disk.setData([3], forKey: "new\(index)") }
            let cutoff = time.clock.milliseconds - 1_800_000
            try store.trim(DiskStore.TrimPlan(accessedBefore: cutoff), now: time.clock.milliseconds)
        }
        try disk.flush()
        // LimitsAndTrimming.md (LMDBCache.docc): each batch under the limit is followed by evicting as many bytes as it added.
        #expect(disk.totalCount >= 950, "about 50 recent entries evicted, not the store: \(disk.totalCount)")
        #expect(try disk.data(forKey: "new49") == [3])
        #expect(try disk.store.verify().isClean)
    }

    @Test("an imported entry keeps its access time however many imports queue before the writer runs")
    func importedAccessTimesKeptPastAccessBuffer() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let created: UInt64 = 1_700_000_000_000
        let count = DiskStore.maxBufferedAccesses + 100
        // The writer busy (a long trim, say) while an import runs: every write and access queues.
        try disk.store.env.writer.sync {
            for index in 0..<count {
                try disk.importEntry(
                    [1], forKey: Array("k\(index)".utf8), created: created, accessed: created + 5_000, expires: nil)
            }
        }
        try disk.flush()
        let last = try #require(try disk.storedEntry(forKey: Array("k\(count - 1)".utf8)))
        #expect(last.accessed == created + 5_000)
    }
}
