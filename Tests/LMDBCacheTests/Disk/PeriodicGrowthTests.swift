import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("Disk tier: a .periodic store's data file under overwrites")
struct PeriodicGrowthTests {
    @Test("overwrites between two periodic syncs grow the data file by a bounded amount, not by every page written")
    func overwritesGrowTheFileBoundedly() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        // Longer than the test: only the growth bound syncs before the final flush.
        configuration.durability = .periodic(syncInterval: .seconds(3_600))
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        // Incompressible 16 KiB values: each overwrite frees 5 pages of its own and takes 5 new ones.
        let keys = 500
        let rounds = 16
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
        let extent = (statistics.pagesInUse + statistics.freePages) * statistics.pageSize
        let written = keys * rounds * 5 * statistics.pageSize
        let live = keys * 5 * statistics.pageSize
        // A sync at most every 32 MiB of growth (the floor; a quarter of the file is less here):
        // the file holds the live pages, those freed before the last sync (reused after it) and
        // those written since, plus LMDB's own. Without the bound it grows by about `written`.
        let bound = live + 3 * DiskStore.periodicGrowthFloor
        #expect(
            extent < bound,
            "data file \(extent >> 20) MiB after writing \(written >> 20) MiB of pages over \(live >> 20) MiB live")
    }
}
