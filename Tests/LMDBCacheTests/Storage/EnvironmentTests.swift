import Foundation
import Testing

@testable import LMDBCache

@Suite("LMDB environment")
struct EnvironmentTests {
    /// Bytes free on the volume holding the temporary directory.
    static var freeTemporarySpace: Int {
        var info = statvfs()
        guard statvfs(FileManager.default.temporaryDirectory.path, &info) == 0 else { return 0 }
        return Int(info.f_bavail) * Int(info.f_frsize)
    }

    @Test(
        "the map grows from 1 MiB past 1 GiB of inserts, and every value reads back",
        .enabled(if: freeTemporarySpace > 3 << 30, "needs 3 GiB free in the temporary directory"))
    func mapGrowsPastOneGiB() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.initialMapSize = 1 << 20
        configuration.compressionThreshold = nil
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        #expect(disk.store.env.mapSize == 1 << 20)
        var value = sampleBytes(count: 1 << 20, compressible: false)
        let count = 1_100
        for index in 0..<count {
            value.withUnsafeMutableBytes { $0.storeBytes(of: UInt64(index), as: UInt64.self) }
            try disk.setData(value, forKey: "v\(index)")
        }
        try disk.flush()
        #expect(disk.totalCount == count)
        #expect(disk.totalCost > 1 << 30)
        #expect(disk.store.env.mapSize > 1 << 30)
        for index in [0, 1, 517, count - 1] {
            let stored = try #require(try disk.data(forKey: "v\(index)"))
            #expect(stored.withUnsafeBytes { $0.load(as: UInt64.self) } == UInt64(index))
            #expect(stored.count == 1 << 20)
        }
    }

    @Test("reader slots of the pool are reused: many reads on many threads need few slots")
    func readersAreReused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1], forKey: "k")
        try disk.flush()
        DispatchQueue.concurrentPerform(iterations: 16) { _ in
            for _ in 0..<2_000 { _ = try? disk.data(forKey: "k") }
        }
        #expect(try disk.data(forKey: "k") == [1])
        #expect(try disk.store.env.readerSlots().count <= 16)
    }
}
