import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("cache-dump put, rm, clear and trim")
struct ChangeCommandTests {
    @Test("put stores standard input or a file, with an expiry when asked")
    func put() throws {
        let cache = try SampleCache(count: 0)
        defer { cache.remove() }
        let value = sampleBytes(count: 5_000, compressible: true)
        let run = try CacheDumpRun(["put", cache.path, "from-stdin"], input: value)
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.text == "stored 5,000 bytes under from-stdin\n")
        let file = cache.directory.url.appendingPathComponent("value.bin")
        try Data([1, 2, 3]).write(to: file)
        #expect(
            try CacheDumpRun(["put", cache.path, "from-file", "--file", file.path, "--expires-after", "2h"]).status == 0
        )

        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.data(forKey: "from-stdin") == value)
        let entry = try #require(try disk.storedEntry(forKey: Array("from-file".utf8)))
        #expect(entry.value == [1, 2, 3])
        #expect(entry.expires == entry.created + 7_200_000)
    }

    @Test("rm removes the keys that are there and reports the others with status 2")
    func remove() throws {
        let cache = try SampleCache(count: 5)
        defer { cache.remove() }
        let run = try CacheDumpRun(["rm", cache.path, "key1", "missing", "key3"])
        #expect(run.status == 2)
        #expect(run.text == "removed 2 of 3 entries\n")
        #expect(run.errorText == "cache-dump: no entry for key missing\n")
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == 3)
        #expect(try disk.data(forKey: "key1") == nil && disk.data(forKey: "key3") == nil)
        #expect(try disk.data(forKey: "key2") == SampleCache.value(2))
    }

    @Test("clear asks first: anything but yes removes nothing (status 10); --yes does not ask")
    func clear() throws {
        let cache = try SampleCache(count: 7)
        defer { cache.remove() }
        let declined = try CacheDumpRun(["clear", cache.path], input: Array("n\n".utf8))
        #expect(declined.status == 10)
        #expect(declined.errorText.contains("Remove all 7 entries from \(cache.path)? [y/N] "))
        #expect(declined.errorText.hasSuffix("cache-dump: nothing removed\n"))
        #expect(try CacheDumpRun(["clear", cache.path]).status == 10, "no answer is no")
        let disk = try cache.open()
        #expect(disk.totalCount == 7)
        disk.close()

        let confirmed = try CacheDumpRun(["clear", cache.path], input: Array("yes\n".utf8))
        #expect(confirmed.status == 0 && confirmed.text == "removed 7 entries\n")
        let again = try SampleCache(count: 3)
        defer { again.remove() }
        #expect(try CacheDumpRun(["clear", again.path, "--yes"]).text == "removed 3 entries\n")
        let emptied = try again.open()
        defer { emptied.close() }
        #expect(emptied.totalCount == 0 && emptied.totalCost == 0)
    }

    @Test("trim removes expired entries, then the least recently used down to the count, bytes or age given")
    func trim() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let now = UInt64(Date().timeIntervalSince1970 * 1_000)
        let hour: UInt64 = 3_600_000
        do {
            let disk = try DiskCache(directory: dir.url)
            defer { disk.close() }
            // k0 … k9: k0 least recently used; k8 and k9 used just now, the others 2 hours ago or more.
            for index in 0..<10 {
                let accessed = index >= 8 ? now : now - 3 * hour + UInt64(index) * 60_000
                try disk.importEntry(
                    [UInt8](repeating: UInt8(index), count: 1_000), forKey: Array("k\(index)".utf8),
                    created: now - 4 * hour, accessed: accessed, expires: nil)
            }
            try disk.importEntry(
                [0], forKey: Array("gone".utf8), created: now - hour, accessed: now - hour, expires: now - 1)
            try disk.flush()
        }
        func keys() throws -> [String] {
            try #require(try CacheDumpRun(["list", dir.path, "--json"]).json() as? [[String: Any]]).compactMap {
                $0["key"] as? String
            }
        }
        let expired = try CacheDumpRun(["trim", dir.path, "--expired"])
        #expect(expired.status == 0, "\(expired.errorText)")
        #expect(expired.text.hasPrefix("removed 1 entry"))
        #expect(try keys().count == 10)

        #expect(try CacheDumpRun(["trim", dir.path, "--count", "8"]).text.hasPrefix("removed 2 entries"))
        #expect(try keys() == (2..<10).map { "k\($0)" })

        let perEntry = try DiskCache.openForInspection(directory: dir.url)
        let bytes = try perEntry.storedEntry(forKey: Array("k5".utf8))!.storedBytes
        perEntry.close()
        #expect(try CacheDumpRun(["trim", dir.path, "--bytes", "\(bytes * 5)"]).status == 0)
        #expect(try keys() == (5..<10).map { "k\($0)" })

        let aged = try CacheDumpRun(["trim", dir.path, "--age", "1h"])
        #expect(aged.text.hasPrefix("removed 3 entries"), "\(aged.text)")
        #expect(try keys() == ["k8", "k9"])
        #expect(try CacheDumpRun(["verify", dir.path]).status == 0)
    }
}
