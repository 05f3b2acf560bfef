import CacheTestSupport
import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

@Suite("cache-dump stats, list, get and readers")
struct InspectionCommandTests {
    @Test("stats counts the entries and bytes the library reports, in text and JSON")
    func stats() throws {
        let cache = try SampleCache(count: 300)
        defer { cache.remove() }
        let disk = try cache.open()
        let (count, cost) = (disk.totalCount, disk.totalCost)
        disk.close()

        let text = try CacheDumpRun(["stats", cache.path])
        #expect(text.status == 0, "\(text.errorText)")
        #expect(text.lines.first == "entries               300")
        #expect(text.text.contains("format version        \(Record.formatVersion)"))
        #expect(text.text.contains("damaged records       0"))

        let run = try CacheDumpRun(["stats", cache.path, "--json"])
        #expect(run.status == 0)
        let json = try #require(try run.json() as? [String: Any])
        #expect(json["entries"] as? Int == count)
        #expect(json["storedBytes"] as? Int == cost)
        #expect(json["logicalBytes"] as? Int == (0..<300).map { SampleCache.value($0).count }.reduce(0, +))
        let compressible = (0..<300).filter { $0 % 3 == 0 && SampleCache.value($0).count >= 512 }.count
        #expect(json["compressedEntries"] as? Int == compressible, "compressible values of 512 bytes or more")
        #expect((json["compressionRatio"] as? Double ?? 0) > 1)
        #expect(json["formatVersion"] as? Int == Int(Record.formatVersion))
        #expect(json["expiredEntries"] as? Int == 0)
        #expect((json["fileSize"] as? Int ?? 0) >= (json["pagesInUse"] as? Int ?? 0) * (json["pageSize"] as? Int ?? 0))
        #expect((json["oldestAccess"] as? Int ?? 0) <= (json["newestAccess"] as? Int ?? -1))
        for key in ["freePages", "mapSize", "readerSlots", "staleReaderSlots", "recordedEntries", "payloadBytes"] {
            #expect(json[key] is Int, "\(key) is a number")
        }
    }

    @Test("stats counts entries past their expiry that are not trimmed yet")
    func statsCountsExpired() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        try disk.importEntry([1], forKey: Array("old".utf8), created: 1_000, accessed: 1_000, expires: 2_000)
        try disk.setData([2], forKey: "new")
        try disk.flush()
        disk.close()
        let json = try #require(try CacheDumpRun(["stats", dir.path, "--json"]).json() as? [String: Any])
        #expect(json["entries"] as? Int == 2)
        #expect(json["expiredEntries"] as? Int == 1)
    }

    @Test("list shows every entry's sizes and times in key order, as text and JSON")
    func list() throws {
        let cache = try SampleCache(count: 16)
        defer { cache.remove() }
        let run = try CacheDumpRun(["list", cache.path])
        #expect(run.status == 0, "\(run.errorText)")
        #expect(
            run.lines.first?.split(separator: " ", omittingEmptySubsequences: true) == [
                "KEY", "STORED", "RAW", "COMPRESSED", "CREATED", "ACCESSED", "EXPIRES", "TAGS",
            ])
        let keys = run.lines.dropFirst().map { String($0.split(separator: " ")[0]) }
        #expect(keys == (0..<16).map { "key\($0)" }.sorted())
        let key15 = try #require(run.lines.first { $0.hasPrefix("key15 ") })
        #expect(key15.contains(" \(SampleCache.value(15).count) ") && key15.contains(" yes "), "\(key15)")
        #expect(
            try #require(run.lines.first { $0.hasPrefix("key3 ") }).contains(" no "), "211 bytes: below the threshold")
        // The last two columns: the expiry, then the tags ("-": none).
        func lastTwo(_ key: String) throws -> [Substring] {
            try #require(run.lines.first { $0.hasPrefix(key + " ") }).split(separator: " ").suffix(2).map { $0 }
        }
        #expect(try lastTwo("key4").first?.hasSuffix("Z") == true, "key4 expires")
        #expect(try lastTwo("key4").last == "-", "untagged")
        #expect(try lastTwo("key5") == ["never", "-"])

        let json = try #require(try CacheDumpRun(["list", cache.path, "--json"]).json() as? [[String: Any]])
        #expect(json.count == 16)
        let entry = try #require(json.first { $0["key"] as? String == "key4" })
        #expect(entry["valueBytes"] as? Int == SampleCache.value(4).count)
        #expect(entry["compressed"] as? Bool == false)
        #expect(entry["keyBase64"] as? String == Data("key4".utf8).base64EncodedString())
        #expect((entry["expires"] as? Int ?? 0) > (entry["created"] as? Int ?? .max))
        #expect((entry["storedBytes"] as? Int ?? 0) > SampleCache.value(4).count)
        #expect(json.first { $0["key"] as? String == "key5" }?["expires"] is NSNull)
        #expect(json.allSatisfy { ($0["tags"] as? [String])?.isEmpty == true }, "no tags: an empty array")
    }

    @Test("list filters by prefix, limits, and sorts by access (least recent first) and size (largest first)")
    func listOptions() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        for (index, name) in ["b", "a", "c", "ab", "x"].enumerated() {
            try disk.importEntry(
                [UInt8](repeating: 1, count: 10 * (index + 1)), forKey: Array(name.utf8), created: 1_000,
                accessed: 5_000 - UInt64(index), expires: nil)
        }
        try disk.flush()
        disk.close()
        func keys(_ arguments: [String]) throws -> [String] {
            let run = try CacheDumpRun(["list", dir.path] + arguments + ["--json"])
            #expect(run.status == 0, "\(run.errorText)")
            return try #require(try run.json() as? [[String: Any]]).compactMap { $0["key"] as? String }
        }
        #expect(try keys([]) == ["a", "ab", "b", "c", "x"])
        #expect(try keys(["--prefix", "a"]) == ["a", "ab"])
        #expect(try keys(["--limit", "2"]) == ["a", "ab"])
        #expect(try keys(["--sort", "access"]) == ["x", "ab", "c", "a", "b"])
        #expect(try keys(["--sort", "size", "--limit", "3"]) == ["x", "ab", "c"])
        #expect(try keys(["--prefix", "zz"]) == [])
    }

    @Test("list shows keys that are not UTF-8 escaped, and long keys whole")
    func listEscapesKeys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        let long = String(repeating: "k", count: 700)
        try disk.setData([1], forKey: [0xff, 0x41, 0x0a])
        try disk.setData([2], forKey: long)
        try disk.flush()
        disk.close()
        let run = try CacheDumpRun(["list", dir.path])
        #expect(run.status == 0)
        #expect(run.lines.contains { $0.hasPrefix(#"\xffA\x0a "#) }, "\(run.text)")
        #expect(run.lines.contains { $0.hasPrefix(long + " ") })
    }

    @Test("get writes exactly the stored bytes, decompressed, to stdout or a file; --hex as text")
    func get() throws {
        let cache = try SampleCache(count: 10)
        defer { cache.remove() }
        for index in [3, 5] {
            let run = try CacheDumpRun(["get", cache.path, "key\(index)"])
            #expect(run.status == 0, "\(run.errorText)")
            #expect(run.output == SampleCache.value(index))
        }
        let hex = try CacheDumpRun(["get", cache.path, "key5", "--hex"])
        #expect(hex.text == SampleCache.value(5).map { String(format: "%02x", $0) }.joined() + "\n")

        let file = cache.directory.url.appendingPathComponent("out.bin").path
        let toFile = try CacheDumpRun(["get", cache.path, "key6", "--output", file])
        #expect(toFile.status == 0 && toFile.output.isEmpty)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: file))) == SampleCache.value(6))
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)
    }

    @Test("get names keys in hex or base64, for keys that are not UTF-8")
    func getEncodedKeys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        try disk.setData([9, 8, 7], forKey: [0xff, 0x00, 0x10])
        try disk.flush()
        disk.close()
        #expect(try CacheDumpRun(["get", dir.path, "ff0010", "--key-encoding", "hex"]).output == [9, 8, 7])
        #expect(try CacheDumpRun(["get", dir.path, "/wAQ", "--key-encoding", "base64"]).output == [9, 8, 7])
        try CacheDumpRun(["get", dir.path, "zz", "--key-encoding", "hex"]).expectFailure(7, mentioning: "hex key")
    }

    @Test("get of a missing or expired key fails with status 2")
    func getMissing() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        try disk.importEntry([1], forKey: Array("old".utf8), created: 1_000, accessed: 1_000, expires: 2_000)
        try disk.flush()
        disk.close()
        try CacheDumpRun(["get", dir.path, "nothing"]).expectFailure(2, mentioning: "no entry for key nothing")
        try CacheDumpRun(["get", dir.path, "old"]).expectFailure(2, mentioning: "expired at 1970-01-01T00:00:02Z")
    }

    @Test("readers lists other processes' slots, marks a killed one's stale, and clears it")
    func readers() throws {
        let cache = try SampleCache(count: 1)
        defer { cache.remove() }
        // Two holders: LMDB resets the reader table when the last process leaves, so a stale
        // slot shows only while another process keeps the store open.
        let staying = try HelperProcess(["hold", cache.path])
        defer { staying.kill() }
        let leaving = try HelperProcess(["hold", cache.path])
        #expect(staying.readLine() == "open" && leaving.readLine() == "open")
        let (stayingID, leavingID) = (Int(staying.processIdentifier), Int(leaving.processIdentifier))

        let live = try #require(try CacheDumpRun(["readers", cache.path, "--json"]).json() as? [[String: Any]])
        let slot = try #require(live.first { $0["pid"] as? Int == leavingID }, "\(live)")
        #expect(slot["stale"] as? Bool == false)
        #expect(slot["command"] as? String == "cache-test-help", "/proc comm is cut to 15 characters")
        let text = try CacheDumpRun(["readers", cache.path])
        #expect(text.lines.first?.split(separator: " ") == ["PID", "THREAD", "TXN", "STATE", "COMMAND"])
        #expect(text.lines.contains { $0.contains("\(leavingID)") && $0.contains("alive") })

        leaving.kill()
        let dead = try #require(try CacheDumpRun(["readers", cache.path, "--json"]).json() as? [[String: Any]])
        #expect(dead.first { $0["pid"] as? Int == leavingID }?["stale"] as? Bool == true, "\(dead)")
        let cleared = try CacheDumpRun(["readers", cache.path, "--clear-stale"])
        #expect(cleared.lines.last == "cleared 1 stale reader slot")
        let after = try #require(try CacheDumpRun(["readers", cache.path, "--json"]).json() as? [[String: Any]])
        #expect(!after.contains { $0["pid"] as? Int == leavingID })
        #expect(after.contains { $0["pid"] as? Int == stayingID })
        let stats = try #require(try CacheDumpRun(["stats", cache.path, "--json"]).json() as? [String: Any])
        #expect(stats["staleReaderSlots"] as? Int == 0)
    }

    @Test("stats works while another process writes, and each run sees a consistent snapshot")
    func statsWhileAnotherProcessWrites() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try DiskCache(directory: dir.url).close()
        let writer = try HelperProcess(["write", dir.path, "w", "20000"])
        let finished = DispatchSemaphore(value: 0)
        Thread {
            _ = writer.wait()
            finished.signal()
        }.start()
        var seen: [Int] = []
        repeat {
            let run = try CacheDumpRun(["stats", dir.path, "--json"])
            #expect(run.status == 0, "\(run.errorText)")
            let json = try #require(try run.json() as? [String: Any])
            let entries = try #require(json["entries"] as? Int)
            #expect(entries == json["recordedEntries"] as? Int, "the scan and the totals come from one snapshot")
            #expect(json["damagedRecords"] as? Int == 0)
            seen.append(entries)
        } while finished.wait(timeout: .now()) == .timedOut
        #expect(seen == seen.sorted(), "entries only grow while the writer adds: \(seen)")
        let final = try #require(try CacheDumpRun(["stats", dir.path, "--json"]).json() as? [String: Any])
        #expect(final["entries"] as? Int == 20_000)
    }
}
