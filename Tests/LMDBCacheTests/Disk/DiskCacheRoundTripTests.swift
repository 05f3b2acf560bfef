import Foundation
import Testing

@testable import LMDBCache

@Suite("DiskCache round trips and compression")
struct DiskCacheRoundTripTests {
    @Test(
        "values of every size come back as stored, before and after a flush and a reopen",
        arguments: [0, 1, 100, 4_096, 1 << 20])
    func roundTrip(size: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let values = [
            "compressible": sampleBytes(count: size, compressible: true),
            "random": sampleBytes(count: size, compressible: false),
        ]
        do {
            let disk = try DiskCache(directory: dir.url)
            for (key, value) in values { try disk.setData(value, forKey: key) }
            for (key, value) in values { #expect(try disk.data(forKey: key) == value, "before flush: \(key)") }
            try disk.flush()
            for (key, value) in values { #expect(try disk.data(forKey: key) == value, "after flush: \(key)") }
            disk.close()
        }
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        for (key, value) in values { #expect(try reopened.data(forKey: key) == value, "after reopen: \(key)") }
        #expect(reopened.totalCount == 2)
    }

    @Test("a compressible value is stored deflated, in fewer bytes than it has")
    func compressionApplied() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: true)
        try disk.setData(value, forKey: "json")
        try disk.flush()
        #expect(disk.totalCost < value.count / 4, "stored \(disk.totalCost) bytes for 4096 bytes of text")
        #expect(try disk.data(forKey: "json") == value)
    }

    @Test("a value that does not shrink is stored as it is: header, key and value only")
    func compressionSkipped() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: false)
        try disk.setData(value, forKey: "random")
        try disk.flush()
        #expect(disk.totalCost == Record.headerSize + "random".utf8.count + value.count)
    }

    @Test("deflate is tried even when the entropy guess passes, and kept only if smaller")
    func compressionKeptOnlyWhenSmaller() throws {
        // Two distinct bytes: low entropy, yet only 600 bytes long, so deflate is tried.
        let value = (0..<600).map { UInt8($0 % 2) }
        let record = value.withUnsafeBytes {
            Record.encode(value: $0, key: try! StorageKey([1]), now: 1, expires: 0, threshold: 512, level: 1)
        }
        let header = try record.withUnsafeBytes { try Record.validate($0) }
        #expect(header.flags.contains(.compressed))
        #expect(record.count < Record.headerSize + value.count)

        let tiny = [UInt8](repeating: 7, count: 100)
        let stored = tiny.withUnsafeBytes {
            Record.encode(value: $0, key: try! StorageKey([1]), now: 1, expires: 0, threshold: 512, level: 1)
        }
        #expect(stored.count == Record.headerSize + 100, "below the threshold values are stored raw")
    }

    @Test("compression can be turned off")
    func compressionOff() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.compressionThreshold = nil
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: true)
        try disk.setData(value, forKey: "k")
        try disk.flush()
        #expect(disk.totalCost == Record.headerSize + 1 + value.count)
    }
}
