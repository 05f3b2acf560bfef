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

    @Test(
        "any compression level works: outside 1...9 the nearest level is used, never a crash",
        arguments: [Int.min, -1, 0, 1, 9, 10, 13, Int.max])
    func compressionLevelClamped(level: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.compressionLevel = level
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: true)
        try disk.setData(value, forKey: "k")
        try disk.flush()
        #expect(disk.totalCost < value.count / 2, "deflated at level \(level)")
        #expect(try disk.data(forKey: "k") == value)
    }

    /// 536 bytes of JSON, deflated raw by zlib 1.2 at level 1 (Python's `zlib.compressobj(1,
    /// zlib.DEFLATED, -15)`), as versions before libdeflate wrote their records.
    static let zlibText = Array(
        String(repeating: #"{"id":12345,"name":"alpha","tags":["beta","gamma"],"value":3.14159}"#, count: 8).utf8)
    static let zlibDeflated: [UInt8] = [
        0xab, 0x56, 0xca, 0x4c, 0x51, 0xb2, 0x32, 0x34, 0x32, 0x36, 0x31, 0xd5, 0x51, 0xca, 0x4b, 0xcc, 0x4d, 0x55,
        0xb2, 0x52, 0x4a, 0xcc, 0x29, 0xc8, 0x48, 0x54, 0xd2, 0x51, 0x2a, 0x49, 0x4c, 0x2f, 0x56, 0xb2, 0x8a, 0x56,
        0x4a, 0x4a, 0x2d, 0x01, 0x71, 0xd3, 0x13, 0x73, 0x73, 0x13, 0x95, 0x62, 0x75, 0x94, 0xca, 0x12, 0x73, 0x4a,
        0x81, 0xea, 0x8c, 0xf5, 0x0c, 0x4d, 0x0c, 0x4d, 0x2d, 0x6b, 0xab, 0x47, 0x8d, 0x18, 0x7e, 0x61, 0x01, 0x00,
    ]

    @Test(
        "a payload zlib deflated reads as before; a stream cut short, with bytes after its end, or of another length is refused"
    )
    func zlibPayloadsRead() {
        func inflate(_ input: [UInt8], length: Int) -> [UInt8]? {
            var output = [UInt8](repeating: 0, count: length)
            let ok = input.withUnsafeBytes { input in
                output.withUnsafeMutableBytes { Deflate.inflate(input, into: $0) }
            }
            return ok ? output : nil
        }
        #expect(inflate(Self.zlibDeflated, length: Self.zlibText.count) == Self.zlibText)
        #expect(Self.zlibText.withUnsafeBytes { Deflate.crc32($0) } == 2_569_277_949, "zlib's crc32 of the text")
        #expect(inflate(Array(Self.zlibDeflated.dropLast(3)), length: Self.zlibText.count) == nil)
        #expect(inflate(Self.zlibDeflated + [0], length: Self.zlibText.count) == nil)
        #expect(inflate(Self.zlibDeflated, length: Self.zlibText.count - 1) == nil)
        #expect(inflate(Self.zlibDeflated, length: Self.zlibText.count + 1) == nil)
    }

    @Test(
        "a batched compressible write is queued as its value and deflated by the writer; reads, expiry and the queue's byte count hold meanwhile"
    )
    func deflatedByTheWriter() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: true)
        try disk.store.env.writer.sync {
            // The writer held: the writes stay queued while the checks run.
            try disk.setData(value, forKey: "json")
            try disk.setData(value, forKey: "gone", expiresAfter: .zero)
            guard case .setDeflatingLater = disk.store.pending(try StorageKey(Array("json".utf8))) else {
                Issue.record("a compressible batched write is left to the writer to deflate")
                return
            }
            #expect(try disk.data(forKey: "json") == value, "read before the commit")
            #expect(try disk.containsData(forKey: "json"))
            #expect(try disk.data(forKey: "gone") == nil, "expired while queued")
            #expect(try !disk.containsData(forKey: "gone"))
        }
        try disk.flush()
        #expect(disk.store.queuedBytes == 0)
        #expect(disk.totalCost < value.count / 2, "deflated on commit: \(disk.totalCost) bytes")
        #expect(try disk.data(forKey: "json") == value)
        #expect(try disk.storedEntry(forKey: Array("json".utf8))?.isCompressed == true)
    }

    @Test("a value over the cost limit undeflated but within it deflated is stored, as before the writer deflated")
    func costLimitCheckedExactly() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url, configuration: .init(costLimit: 3_000))
        defer { disk.close() }
        let value = sampleBytes(count: 4_096, compressible: true)
        try disk.setData(value, forKey: "json")
        try disk.flush()
        #expect(try disk.data(forKey: "json") == value)
        #expect(throws: CacheError.self) {
            try disk.setData(sampleBytes(count: 4_096, compressible: false), forKey: "raw")
        }
    }

    @Test("a value over 64 KiB is deflated by its caller, never left to hold up the writer")
    func largeValuesDeflatedByTheCaller() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let value = sampleBytes(count: DiskCache.maxDeferredDeflate + 1, compressible: true)
        try disk.store.env.writer.sync {
            try disk.setData(value, forKey: "large")
            guard case .set = disk.store.pending(try StorageKey(Array("large".utf8))) else {
                Issue.record("a value over the cap is queued as its built record")
                return
            }
        }
        try disk.flush()
        #expect(try disk.data(forKey: "large") == value)
    }
}
