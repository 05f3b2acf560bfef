import Foundation
import Testing

@testable import LMDBCache

@Suite("Keys of any length")
struct StorageKeyTests {
    @Test("an empty key is refused with a clear error")
    func emptyKey() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        #expect(throws: CacheError.invalidKey(reason: "keys must not be empty")) {
            try disk.setData([1], forKey: [])
        }
        #expect(throws: CacheError.self) { try disk.data(forKey: "") }
    }

    @Test(
        "keys of 1, 503, 504, 511, 512 and 10,000 bytes store and read their own values",
        arguments: [1, 503, 504, 511, 512, 10_000])
    func keyLengths(length: Int) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        let key = sampleBytes(count: length, compressible: false, seed: UInt64(length))
        let value = Array("value for a key of \(length) bytes".utf8)
        try disk.setData(value, forKey: key)
        #expect(try disk.data(forKey: key) == value)
        try disk.flush()
        disk.close()
        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        #expect(try reopened.data(forKey: key) == value)
        #expect(try reopened.containsData(forKey: key))
        try reopened.removeData(forKey: key)
        #expect(try reopened.data(forKey: key) == nil)
        try reopened.flush()
        #expect(reopened.totalCount == 0)
    }

    @Test("many long keys sharing a 600-byte prefix each keep their own value")
    func sharedLongPrefix() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        let prefix = [UInt8](repeating: UInt8(ascii: "p"), count: 600)
        let keys = (0..<300).map { prefix + Array("-\($0)".utf8) }
        for (index, key) in keys.enumerated() { try disk.setData(Array("v\(index)".utf8), forKey: key) }
        try disk.flush()
        #expect(disk.totalCount == keys.count)
        for (index, key) in keys.enumerated() { #expect(try disk.data(forKey: key) == Array("v\(index)".utf8)) }
        #expect(try disk.data(forKey: prefix + Array("-300".utf8)) == nil)
    }

    @Test("a long key whose stored form matches another record never reads that record's value")
    func digestMismatchIsAMiss() throws {
        let long = [UInt8](repeating: 9, count: 900)
        let stored = try StorageKey(long)
        #expect(stored.bytes.count == StorageKey.directLimit)
        // A key whose bytes equal the long key's stored form is a different, direct key.
        let direct = try StorageKey(stored.bytes)
        #expect(direct.fullKey == nil)
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1, 2, 3], forKey: stored.bytes)
        try disk.flush()
        #expect(try disk.data(forKey: long) == nil)
        #expect(try disk.data(forKey: stored.bytes) == [1, 2, 3])
    }
}
