import Foundation
import Testing

@testable import LMDBCache

/// The `info` database's integers come from the file: any 8-byte value must be survivable.
@Suite("Damaged integers in the info database: no trap, a clear error or a store that keeps working")
struct DamagedInfoTests {
    /// Writes `value` under `key` in the `info` database of the store in `dir`, behind the
    /// library's back (one write transaction), as a flipped bit on disk would.
    static func tamper(_ dir: TemporaryDirectory, _ key: [UInt8], _ value: UInt64) throws {
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let store = disk.store
        try store.env.writer.sync { try store.env.write { txn in try Totals.store(txn, store.db.info, key, value) } }
    }

    static func filledStore(_ dir: TemporaryDirectory, count: Int) throws {
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        for index in 0..<count { try disk.setData([UInt8](repeating: UInt8(index), count: 50), forKey: "k\(index)") }
        try disk.flush()
    }

    @Test(
        "totals above Int.max do not crash the writer: writes, trims and totals go on, and verify repairs them",
        arguments: [Totals.countKey, Totals.bytesKey], [UInt64(1) << 63, .max, UInt64(Int.max) + 1])
    func totalsAboveIntMax(key: [UInt8], value: UInt64) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try Self.filledStore(dir, count: 10)
        try Self.tamper(dir, key, value)
        var configuration = DiskCache.Configuration(countLimit: 1_000, costLimit: 1 << 30)
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        #expect(disk.totalCount >= 0 && disk.totalCost >= 0)
        for index in 10..<20 { try disk.setData([1, 2, 3], forKey: "k\(index)") }
        try disk.removeData(forKey: "k0")
        try disk.flush()
        disk.trimPass()
        try disk.trim(toCount: 1_000)
        for index in 1..<20 { #expect(try disk.data(forKey: "k\(index)") != nil, "k\(index) kept") }
        _ = try disk.storeStatistics()
        #expect(!(try disk.store.verify().isClean), "the damaged totals are reported")
        _ = try disk.repair()
        #expect(try disk.store.verify().isClean, "and repaired")
        #expect(disk.totalCount == 19)
    }

    @Test(
        "a format with its top bit flipped is refused with unsupportedFormat, never a trap", arguments: [true, false])
    func formatTopBit(readOnly: Bool) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try Self.filledStore(dir, count: 3)
        try Self.tamper(dir, Totals.formatKey, UInt64(1) << 63 | UInt64(Record.formatVersion))
        var configuration = DiskCache.Configuration()
        configuration.readOnly = readOnly
        #expect(
            throws: CacheError.unsupportedFormat(
                path: dir.url.standardizedFileURL.path, found: .max, supported: Int(Record.formatVersion))
        ) {
            try DiskCache(directory: dir.url, configuration: configuration)
        }
    }
}
