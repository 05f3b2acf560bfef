import Foundation
import Testing

@testable import LMDBCache

@Suite("Compaction")
struct DiskCacheCompactTests {
    @Test("compact keeps every entry and shrinks the file after deletions")
    func compactShrinks() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.compressionThreshold = nil
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let value = { (i: Int) in sampleBytes(count: 2_000, compressible: false, seed: UInt64(i)) }
        for i in 0..<5_000 {
            try disk.setData(value(i), forKey: "k\(i)", expiresAfter: i % 2 == 0 ? .seconds(3_600) : nil)
        }
        try disk.flush()
        for i in 0..<5_000 where i % 5 != 0 { try disk.removeData(forKey: "k\(i)") }
        try disk.flush()
        let before = disk.fileSize
        let totals = (disk.totalCount, disk.totalCost)
        try disk.compact()
        #expect(disk.fileSize < before / 3, "from \(before) to \(disk.fileSize) bytes")
        #expect((disk.totalCount, disk.totalCost) == totals)
        for i in stride(from: 0, to: 5_000, by: 5) { #expect(try disk.data(forKey: "k\(i)") == value(i)) }
        #expect(try disk.store.verify().isClean)
        // The store works as before: writes, reads, the expiry index.
        try disk.setData([7], forKey: "after")
        try disk.flush()
        #expect(try disk.data(forKey: "after") == [7])
        #expect(!FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("compact.tmp").path))
    }

    @Test("compact refuses while a second process holds the store, and works once it is gone")
    func refusesWhileShared() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1], forKey: "k")
        let holder = try HelperProcess(["hold", dir.path])
        #expect(holder.readLine() == "open")
        #expect(throws: CacheError.storeInUse(path: disk.store.path, operation: "compact")) { try disk.compact() }
        #expect(try disk.data(forKey: "k") == [1], "still usable after the refusal")
        holder.kill()
        try disk.compact()
        #expect(try disk.data(forKey: "k") == [1])
    }
}

@Suite("Compaction's leftovers")
struct DiskCacheCompactLeftoverTests {
    @Test("compaction removes a compact.tmp symbolic link without following it")
    func symlinkNotFollowed() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let elsewhere = TemporaryDirectory()
        defer { elsewhere.remove() }
        try FileManager.default.createDirectory(at: elsewhere.url, withIntermediateDirectories: true)
        let victim = elsewhere.url.appendingPathComponent("data.mdb")
        try Data([9, 9, 9]).write(to: victim)
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1], forKey: "k")
        try FileManager.default.createSymbolicLink(
            atPath: dir.url.appendingPathComponent("compact.tmp").path, withDestinationPath: elsewhere.path)
        try disk.compact()
        #expect(FileManager.default.fileExists(atPath: victim.path), "the link's target is untouched")
        #expect(try Data(contentsOf: victim) == Data([9, 9, 9]))
        #expect(try disk.data(forKey: "k") == [1])
    }
}
