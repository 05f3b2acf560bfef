import CacheDump
import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("cache-dump export and import")
struct TransferCommandTests {
    @Test("export then import into a new directory gives identical keys, values, times and expiries")
    func roundTrip() throws {
        let source = TemporaryDirectory()
        let target = TemporaryDirectory()
        defer {
            source.remove()
            target.remove()
        }
        let now = UInt64(Date().timeIntervalSince1970 * 1_000)
        do {
            let disk = try DiskCache(directory: source.url)
            defer { disk.close() }
            for index in 0..<500 {
                try disk.setData(
                    SampleCache.value(index), forKey: "key\(index)", expiresAfter: index % 4 == 0 ? .seconds(600) : nil)
            }
            try disk.setData([0xff, 0], forKey: [0xfe, 0xff])
            try disk.setData([], forKey: "empty value")
            try disk.setData(Array("long".utf8), forKey: String(repeating: "L", count: 2_000))
            try disk.importEntry(
                [5], forKey: Array("used later".utf8), created: now - 10_000, accessed: now - 5_000, expires: nil)
            try disk.importEntry([6], forKey: Array("expired".utf8), created: 1_000, accessed: 1_000, expires: 2_000)
            try disk.flush()
        }
        let exportFile = source.url.appendingPathComponent("export.jsonl").path
        let exported = try CacheDumpRun(["export", source.path, "--output", exportFile])
        #expect(exported.status == 0, "\(exported.errorText)")
        #expect(exported.errorText == "cache-dump: exported 504 entries\n", "the expired entry is left out")
        let lines = try String(contentsOfFile: exportFile, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == #"{"format":"lmdbcache-export","version":1}"#)
        #expect(lines.count == 505)
        #expect(
            try CacheDumpRun(["export", source.path]).output
                == [UInt8](try Data(contentsOf: URL(fileURLWithPath: exportFile))))

        let imported = try CacheDumpRun(["import", target.path, exportFile])
        #expect(imported.status == 0, "\(imported.errorText)")
        #expect(imported.text == "imported 504 entries; skipped 0 expired\n")
        #expect(try Self.entries(target) == Self.entries(source).filter { !$0.isExpired(at: now) })
        #expect(try Self.entries(target).first { $0.key == Array("used later".utf8) }?.accessed == now - 5_000)
        #expect(try CacheDumpRun(["verify", target.path]).status == 0)
        let mode = try FileManager.default.attributesOfItem(atPath: exportFile)[.posixPermissions] as? Int
        #expect(mode == 0o600, "an export holds cache contents: owner-only")
    }

    @Test("import checks the whole file first: a bad line fails with status 7 and writes nothing")
    func badFiles() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let target = dir.url.appendingPathComponent("cache").path
        let good = ExportFormat.Entry(key: [1], value: [2], created: 1, accessed: 1, expires: nil).line
        let cases: [(lines: [String], message: String)] = [
            ([], "1: empty file"),
            (["{\"format\":\"something-else\",\"version\":1}"], "1: not an LMDBCache export"),
            (["{\"format\":\"lmdbcache-export\",\"version\":2}"], "1: export format version 2"),
            ([ExportFormat.header, good, "{\"key\":\"AQ==\"}"], "3: not an entry: \"value\" is missing"),
            ([ExportFormat.header, good, "not json"], "3: not an entry: not valid JSON"),
            (
                [ExportFormat.header, #"{"key":"","value":"","created":1,"accessed":1,"expires":null}"#],
                "2: \"key\" is not"
            ),
            (
                [ExportFormat.header, #"{"key":"AQ==","value":"%%","created":1,"accessed":1,"expires":null}"#],
                "2: \"value\" is not base64"
            ),
            (
                [ExportFormat.header, #"{"key":"AQ==","value":"","created":-1,"accessed":1,"expires":null}"#],
                "2: \"created\" and \"accessed\" must be 0 or more"
            ),
        ]
        for (index, bad) in cases.enumerated() {
            let file = dir.url.appendingPathComponent("bad\(index).jsonl").path
            try Data(bad.lines.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: file))
            try CacheDumpRun(["import", target, file]).expectFailure(7, mentioning: "\(file):\(bad.message)")
            #expect(!FileManager.default.fileExists(atPath: target), "case \(index) created the cache")
        }
        try CacheDumpRun(["import", target, dir.url.appendingPathComponent("none").path])
            .expectFailure(7, mentioning: "cannot read")
    }
}

extension TransferCommandTests {
    /// Every entry of the cache in `directory`, values included.
    static func entries(_ directory: TemporaryDirectory) throws -> [StoredEntry] {
        let disk = try DiskCache.openForInspection(directory: directory.url)
        defer { disk.close() }
        return try disk.storedEntries(after: nil, limit: .max, withValues: true).map { entry in
            var entry = entry
            entry.storedBytes = 0  // compression may differ; the content may not
            return entry
        }
    }
}

@Suite("cache-dump compact")
struct CompactCommandTests {
    @Test("compact shrinks the file after deletions and keeps every entry")
    func shrinks() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let value = { (index: Int) in sampleBytes(count: 2_000, compressible: false, seed: UInt64(index)) }
        do {
            let disk = try DiskCache(directory: dir.url)
            defer { disk.close() }
            for index in 0..<3_000 { try disk.setData(value(index), forKey: "k\(index)") }
            try disk.flush()
            for index in 0..<3_000 where index % 5 != 0 { try disk.removeData(forKey: "k\(index)") }
            try disk.flush()
        }
        let size = { (try FileManager.default.attributesOfItem(atPath: dir.path + "/data.mdb")[.size] as? Int) ?? 0 }
        let before = try size()
        let run = try CacheDumpRun(["compact", dir.path])
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.text.hasPrefix("compacted \(dir.path): ") && run.text.hasSuffix(", 600 entries\n"), "\(run.text)")
        let after = try size()
        #expect(after < before / 3, "from \(before) to \(after) bytes")
        let disk = try DiskCache.openForInspection(directory: dir.url)
        defer { disk.close() }
        #expect(disk.totalCount == 600)
        for index in stride(from: 0, to: 3_000, by: 5) {
            #expect(try disk.storedEntry(forKey: Array("k\(index)".utf8))?.value == value(index))
        }
        #expect(try disk.verify().isClean)
    }

    @Test("compact refuses with status 6 while another process has the store open")
    func refusesWhileShared() throws {
        let cache = try SampleCache(count: 10)
        defer { cache.remove() }
        let holder = try HelperProcess(["hold", cache.path])
        defer { holder.kill() }
        #expect(holder.readLine() == "open")
        try CacheDumpRun(["compact", cache.path]).expectFailure(6, mentioning: "cannot compact the store")
    }
}
