import Foundation
import Testing

@testable import LMDBCache

@Suite("DiskCache round trips")
struct DiskCacheRoundTripTests {
    @Test("values of every size come back as stored, before and after a flush and a reopen",
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
}
