import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("Disk tier: a .periodic store's data file under overwrites")
struct PeriodicGrowthTests {
    @Test("overwrites in .periodic mode keep the free pages bounded: the writer syncs once commits freed enough")
    func overwritesKeepFreePagesBounded() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        // Longer than the test: only the bound on freed pages syncs before the final flush.
        configuration.durability = .periodic(syncInterval: .seconds(3_600))
        configuration.automaticTrimming = false
        let bound = 1 << 20
        configuration.freedBytesBeforeSync = bound
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        // Incompressible 16 KiB values on pages of their own: each overwrite frees its old pages.
        let keys = 100
        let rounds = 80
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func value() -> [UInt8] {
            (0..<(16 << 10)).map { _ in
                state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
                return UInt8(truncatingIfNeeded: state >> 56)
            }
        }
        let values = (0..<8).map { _ in value() }
        for round in 0..<rounds {
            for key in 0..<keys { try disk.setData(values[(key + round) % values.count], forKey: "k\(key)") }
        }
        try disk.flush()
        let statistics = try disk.storeStatistics()
        #expect(statistics.entries == keys)
        let free = statistics.freePages * statistics.pageSize
        let written = keys * rounds * (16 << 10)
        // At a sync: up to the bound plus the batch that passed it (at most `keys` values) freed
        // and pinned, which the next interval reuses before it takes pages at the end, and LMDB's
        // own. Without the bound nearly every page written stays behind, free (104 MiB here); with
        // one that counted the file's growth instead, it grows with the square root of the writes.
        let batch = keys * (17 << 10)
        #expect(
            free <= 3 * (bound + batch),
            "\(free >> 10) KiB free in the data file after writing \(written >> 20) MiB of values")
    }
}
