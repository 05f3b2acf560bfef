import Foundation
import Testing

@testable import LMDBCache

@Suite(
    "Disk space: free-space limit and a full disk", .serialized,
    .enabled(if: TmpfsVolume.canMount, TmpfsVolume.skipReason))
struct DiskSpaceTests {
    @Test("under a steady write load the volume's free space stays near the free-space limit")
    func freeSpaceLimitHolds() throws {
        let volume = try TmpfsVolume(megabytes: 48)
        defer { volume.unmount() }
        let limit = 16 << 20
        var configuration = DiskCache.Configuration(freeSpaceLimit: limit)
        configuration.compressionThreshold = nil
        configuration.automaticTrimming = false
        configuration.initialMapSize = 1 << 20
        let disk = try DiskCache(directory: volume.url.appendingPathComponent("cache"), configuration: configuration)
        defer { disk.close() }
        var lowest = Int.max
        // 96 MiB of values through a 48 MiB volume.
        for round in 0..<32 {
            for i in 0..<1_000 {
                try disk.setData(
                    sampleBytes(count: 3_000, compressible: false, seed: UInt64(round * 1_000 + i)),
                    forKey: "r\(round)-\(i)")
            }
            try disk.flush()
            lowest = min(lowest, volume.available)
        }
        // Once below the limit the store stops growing: free space ends within a few batches'
        // worth of pages of the limit, and never runs out.
        #expect(lowest > limit - (8 << 20), "lowest free: \(lowest) bytes")
        #expect(try disk.data(forKey: "r31-999") == sampleBytes(count: 3_000, compressible: false, seed: 31_999))
        #expect(try disk.data(forKey: "r0-0") == nil, "the oldest went to make room")
        #expect(disk.totalCount > 1_000)
    }

    @Test(
        "a full disk: diskFull from flush after the emergency trim, reads keep working, writes resume once space is freed"
    )
    func fullDisk() throws {
        let volume = try TmpfsVolume(megabytes: 16)
        defer { volume.unmount() }
        var configuration = DiskCache.Configuration()
        configuration.compressionThreshold = nil
        configuration.automaticTrimming = false
        configuration.initialMapSize = 1 << 20
        let disk = try DiskCache(directory: volume.url.appendingPathComponent("cache"), configuration: configuration)
        defer { disk.close() }
        let value = { (seed: Int) in sampleBytes(count: 3_000, compressible: false, seed: UInt64(seed)) }
        for i in 0..<2_000 { try disk.setData(value(i), forKey: "k\(i)") }
        try disk.flush()

        // Take the rest of the volume, then write more than eviction can make room for.
        let filler = try volume.fill("filler", bytes: max(0, volume.available - (64 << 10)))
        let kept = disk.totalCount
        for i in 0..<3_000 { try disk.setData(value(100_000 + i), forKey: "big\(i)") }
        // Whether one of these batches fails depends on how the writer batched them: an emergency
        // trim evicts twice a batch's bytes, and its retry may fit. Either way, what follows holds.
        _ = try? disk.flush()
        // Reads work: every entry still there has its own value. The emergency trims may have
        // evicted all of the oldest: how many depends on how the writer batched the writes (one
        // batch of 1,000 values evicts twice its 3 MB), so only the bound is checked.
        var present = 0
        for i in 0..<2_000 {
            if let found = try disk.data(forKey: "k\(i)") {
                #expect(found == value(i))
                present += 1
            }
        }
        var newer = 0
        for i in 0..<3_000 {
            if let found = try disk.data(forKey: "big\(i)") {
                #expect(found == value(100_000 + i))
                newer += 1
            }
        }
        #expect(present <= kept)
        #expect(present + newer == disk.totalCount, "every stored entry reads back")
        #expect(disk.totalCount > 0)
        let report = try disk.store.verify()
        #expect(report.isClean, "nothing stored was damaged")

        // A value larger than the volume: evicting everything cannot make room, so the retry
        // after the emergency trim fails, whatever the batching, and flush throws diskFull.
        try disk.setData(sampleBytes(count: 20 << 20, compressible: false, seed: 7), forKey: "huge")
        #expect(throws: CacheError.diskFull(path: disk.directory.standardizedFileURL.path)) { try disk.flush() }
        #expect(try disk.data(forKey: "huge") == nil)
        #expect(try disk.store.verify().isClean, "nothing stored was damaged")

        try FileManager.default.removeItem(at: filler)
        try disk.setData([1, 2, 3], forKey: "after")
        try disk.flush()
        #expect(try disk.data(forKey: "after") == [1, 2, 3])
    }

    @Test("a full disk in synchronous mode: setData throws diskFull at once, reads and earlier values are intact")
    func fullDiskSynchronous() throws {
        let volume = try TmpfsVolume(megabytes: 8)
        defer { volume.unmount() }
        var configuration = DiskCache.Configuration()
        configuration.compressionThreshold = nil
        configuration.automaticTrimming = false
        configuration.durability = .synchronous
        configuration.initialMapSize = 1 << 20
        let disk = try DiskCache(directory: volume.url.appendingPathComponent("cache"), configuration: configuration)
        defer { disk.close() }
        let value = { (seed: Int) in sampleBytes(count: 3_000, compressible: false, seed: UInt64(seed)) }
        for i in 0..<200 { try disk.setData(value(i), forKey: "k\(i)") }
        // A write that cannot fit even after the emergency trim evicts everything: 256 KiB free,
        // 600 KB stored, the 1 MiB reserve, and a 4 MiB value.
        let filler = try volume.fill("filler", bytes: max(0, volume.available - (256 << 10)))
        let big = sampleBytes(count: 4 << 20, compressible: false, seed: 1)
        #expect(throws: CacheError.diskFull(path: disk.directory.standardizedFileURL.path)) {
            try disk.setData(big, forKey: "big")
        }
        #expect(try disk.data(forKey: "big") == nil, "the refused write is not readable")
        // Reads work: every entry still there (the emergency trim may have evicted any) is its own.
        for i in 0..<200 {
            guard let found = try disk.data(forKey: "k\(i)") else { continue }
            let isOwn = found == value(i)
            #expect(isOwn, "k\(i) holds another value")
        }
        #expect(try disk.store.verify().isClean, "nothing stored was damaged")
        try FileManager.default.removeItem(at: filler)
        try disk.setData(big, forKey: "big")
        let written = try disk.data(forKey: "big") == big
        #expect(written, "writes succeed once space is freed")
    }

    @Test("a full disk under the two-tier cache: flush throws diskFull and statistics count the dropped write")
    func fullDiskInStatistics() throws {
        let volume = try TmpfsVolume(megabytes: 8)
        defer { volume.unmount() }
        var disk = DiskCache.Configuration()
        disk.compressionThreshold = nil
        disk.automaticTrimming = false
        disk.initialMapSize = 1 << 20
        let directory = volume.url.appendingPathComponent("cache")
        let cache = try Cache<String, [UInt8]>(directory: directory, configuration: .init(disk: disk))
        defer { cache.close() }
        cache["before"] = [1, 2, 3]
        try cache.flush()
        // More than the volume can take even after evicting everything and freeing the reserve.
        let filler = try volume.fill("filler", bytes: max(0, volume.available - (256 << 10)))
        cache["big"] = sampleBytes(count: 4 << 20, compressible: false, seed: 1)
        #expect(throws: CacheError.diskFull(path: directory.standardizedFileURL.path)) { try cache.flush() }
        #expect(cache.statistics.failedWrites == 1, "the dropped write shows in statistics")
        #expect(try cache.disk?.data(forKey: "big") == nil, "the dropped write is not on disk")
        try FileManager.default.removeItem(at: filler)
        cache["after"] = [4]
        try cache.flush()
        #expect(try cache.disk?.data(forKey: "after") == [4], "writes succeed once space is freed")
    }
}
