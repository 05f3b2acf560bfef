import Foundation
import Testing

@testable import LMDBCache

@Suite("Faults: damaged records and stores, bad directories")
struct DiskCacheFaultTests {
    /// Flips one byte in the middle of `needle`'s first occurrence in `file`.
    static func flipByte(of needle: [UInt8], in file: String) throws {
        var contents = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file)))
        let window = Array(needle[1_000..<1_032])
        let offset = try #require(
            (0...(contents.count - window.count)).first { start in
                contents[start] == window[0] && Array(contents[start..<(start + window.count)]) == window
            }, "the value's bytes are in the data file")
        contents[offset + 16] ^= 0xFF
        try Data(contents).write(to: URL(fileURLWithPath: file))
    }

    @Test("a record whose bytes were flipped in the data file is a miss, is removed, and hurts no other key")
    func flippedRecordIsAMiss() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let victim = sampleBytes(count: 3_000, compressible: false, seed: 7)
        let bystander = sampleBytes(count: 3_000, compressible: false, seed: 8)
        do {
            let disk = try DiskCache(directory: dir.url)
            try disk.setData(victim, forKey: "victim")
            try disk.setData(bystander, forKey: "bystander")
            try disk.flush()
            disk.close()
        }
        try Self.flipByte(of: victim, in: dir.path + "/data.mdb")

        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        #expect(try disk.data(forKey: "victim") == nil)
        #expect(try disk.data(forKey: "bystander") == bystander)
        try disk.flush()
        #expect(disk.totalCount == 1, "the damaged record was removed")
        #expect(try disk.store.verify().isClean)
    }

    @Test("a store whose file is not LMDB is moved aside and recreated empty")
    func damagedStoreRecreated() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let garbage = Data(sampleBytes(count: 64 << 10, compressible: false))
        try garbage.write(to: dir.url.appendingPathComponent("data.mdb"))

        let disk = try DiskCache(directory: dir.url)
        try disk.setData([1], forKey: "k")
        try disk.flush()
        #expect(try disk.data(forKey: "k") == [1])
        disk.close()
        let files = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        let aside = try #require(files.first { $0.hasPrefix("data.mdb.damaged-") })
        #expect(try Data(contentsOf: dir.url.appendingPathComponent(aside)) == garbage, "the damaged file is kept")
    }

    @Test("a damaged store throws when the configuration says to fail, and is left untouched")
    func damagedStoreFails() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let garbage = Data(sampleBytes(count: 64 << 10, compressible: false))
        try garbage.write(to: dir.url.appendingPathComponent("data.mdb"))
        var configuration = DiskCache.Configuration()
        configuration.damagedStore = .fail
        #expect {
            _ = try DiskCache(directory: dir.url, configuration: configuration)
        } throws: { error in
            guard case .damagedStore(let path, _) = error as? CacheError else { return false }
            return path == dir.url.standardizedFileURL.path
        }
        #expect(try Data(contentsOf: dir.url.appendingPathComponent("data.mdb")) == garbage)
    }

    @Test("a directory that cannot be created gives a clear error")
    func directoryCannotBeCreated() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let file = dir.url.appendingPathComponent("a-file")
        try Data([1]).write(to: file)
        #expect {
            _ = try DiskCache(directory: file.appendingPathComponent("cache"))
        } throws: { error in
            guard case .directoryUnavailable(_, let reason) = error as? CacheError else { return false }
            return reason.contains("cannot create it")
        }
        #expect {
            _ = try DiskCache(directory: file)
        } throws: { error in
            guard case .directoryUnavailable(_, let reason) = error as? CacheError else { return false }
            return reason.contains("not a directory")
        }
    }

    @Test("a store written in a newer record format is refused, not overwritten")
    func newerFormatRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            try disk.setData([1], forKey: "k")
            try disk.flush()
            let store = disk.store
            try store.env.writer.sync {
                try store.env.write { txn in try Totals.store(txn, store.db.info, Totals.formatKey, 99) }
            }
            disk.close()
        }
        #expect(
            throws: CacheError.unsupportedFormat(
                path: dir.url.standardizedFileURL.path, found: 99, supported: Int(Record.formatVersion))
        ) {
            _ = try DiskCache(directory: dir.url)
        }
    }

    @Test("the directory and its files are owner-only")
    func ownerOnlyPermissions() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url.appendingPathComponent("nested/cache"))
        try disk.setData([1], forKey: "k")
        try disk.flush()
        disk.close()
        for path in ["nested", "nested/cache", "nested/cache/data.mdb", "nested/cache/lock.mdb"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: dir.path + "/" + path)
            let mode = try #require(attributes[.posixPermissions] as? Int)
            #expect(mode & 0o077 == 0, "\(path) has mode \(String(mode, radix: 8))")
        }
    }
}
