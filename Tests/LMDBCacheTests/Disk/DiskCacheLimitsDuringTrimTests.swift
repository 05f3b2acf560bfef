import Foundation
import Testing

@testable import LMDBCache

@Suite("Writes committed while a trim runs")
struct DiskCacheLimitsDuringTrimTests {
    @Test("writes committed between a trim's transactions are brought inside their limits before flush returns")
    func limitsHoldAfterFlush() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration(countLimit: 500)
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        // Queued while the writer is busy, so one drain takes them in three batches of 1,000: the
        // first passes the limit and starts a trim of several transactions, between which the
        // other two batches commit.
        try disk.store.env.writer.sync {
            for index in 0..<3_000 { try disk.setData([UInt8(truncatingIfNeeded: index)], forKey: "k\(index)") }
        }
        try disk.flush()
        #expect(disk.totalCount <= 500, "the count limit holds once flush returns")
        #expect(try disk.store.verify().isClean)
        #expect(try disk.data(forKey: "k2999") == [UInt8(truncatingIfNeeded: 2_999)], "the newest entries stay")
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
