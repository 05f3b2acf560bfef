import CacheDump
import CacheTestSupport
import Foundation
import Glibc
import Testing

@testable import LMDBCache

/// `import` reads its file twice, a line at a time: first to check every line against every
/// limit a write would check, then to write. A line that no valid entry could fill is refused
/// without being read whole; nothing is written (the cache not even created) unless every line
/// passed.
@Suite("cache-dump import: bounded lines, every limit checked before anything is written", .serialized)
struct ImportLimitTests {
    @Test("a value over the disk tier's 256 MiB limit on line 3 fails with status 7 at FILE:3; nothing is written")
    func valueOverLimit() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let file = dir.url.appendingPathComponent("big.jsonl").path
        let first = ExportFormat.Entry(key: Array("first".utf8), value: [1], created: 1, accessed: 1, expires: nil)
        // "AAAA" is three zero bytes: a value three bytes over the limit.
        let groups = (Record.maxValueSize + 3) / 3
        try Self.writeFile(file) { write in
            write(Array((ExportFormat.header + "\n" + first.line + "\n").utf8))
            write(Array(#"{"key":"Ymln","created":1,"accessed":1,"expires":null,"value":""#.utf8))
            let chunk = [UInt8](repeating: UInt8(ascii: "A"), count: 4 << 20)
            var left = groups * 4
            while left > 0 {
                write(Array(chunk.prefix(left)))
                left -= min(left, chunk.count)
            }
            write(Array("\"}\n".utf8))
        }

        let target = dir.url.appendingPathComponent("new-cache").path
        let run = try CacheDumpRun(["import", target, file])
        run.expectFailure(7, mentioning: "\(file):3: ")
        #expect(run.errorText.contains("\"value\""), "\(run.errorText)")
        #expect(!FileManager.default.fileExists(atPath: target), "the cache is not even created")

        // Into a cache that exists: it keeps what it held and gains nothing.
        let existing = try SampleCache(count: 1)
        defer { existing.remove() }
        try CacheDumpRun(["import", existing.path, file]).expectFailure(7, mentioning: "\(file):3: ")
        let keys = try TransferCommandTests.entries(existing.directory).map(\.key)
        #expect(keys == [Array("key0".utf8)], "line 2 was not imported")
    }

    @Test("a line longer than any valid entry is refused at FILE:LINE before anything is written")
    func overlongLine() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let file = dir.url.appendingPathComponent("long.jsonl").path
        // Line 2 starts an entry and runs on, without a newline, for 400 MiB: more than a 256 MiB
        // value and the longest key in base64. Sparse: the zeros take no disk space.
        try Self.writeFile(file) { write in
            write(Array((ExportFormat.header + "\n" + #"{"key":"AQ==","value":""#).utf8))
        }
        #expect(truncate(file, 400 << 20) == 0)

        let target = dir.url.appendingPathComponent("new-cache").path
        let run = try CacheDumpRun(["import", target, file])
        run.expectFailure(7, mentioning: "\(file):2: ")
        #expect(run.errorText.contains("longer than"), "\(run.errorText)")
        #expect(!FileManager.default.fileExists(atPath: target), "the cache is not even created")
    }

    @Test("a key over import's limit is refused at FILE:LINE before anything is written")
    func keyOverLimit() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let file = dir.url.appendingPathComponent("key.jsonl").path
        let good = ExportFormat.Entry(key: [1], value: [2], created: 1, accessed: 1, expires: nil)
        let long = ExportFormat.Entry(
            key: [UInt8](repeating: 0x6b, count: (16 << 20) + 1), value: [], created: 1, accessed: 1, expires: nil)
        try Data((ExportFormat.header + "\n" + good.line + "\n" + long.line + "\n").utf8)
            .write(to: URL(fileURLWithPath: file))
        let target = dir.url.appendingPathComponent("new-cache").path
        let run = try CacheDumpRun(["import", target, file])
        run.expectFailure(7, mentioning: "\(file):3: ")
        #expect(run.errorText.contains("\"key\""), "\(run.errorText)")
        #expect(!FileManager.default.fileExists(atPath: target))
    }

    @Test("export writes a key over import's limit, and warns that import will refuse the file")
    func exportWarnsAboutLongKeys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            defer { disk.close() }
            try disk.setData([1], forKey: [UInt8](repeating: 0x6b, count: ExportFormat.maxKeyLength + 1))
            try disk.setData([2], forKey: "short")
            try disk.flush()
        }
        let run = try CacheDumpRun(["export", dir.path])
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.lines.count == 3, "the header and both entries")
        #expect(run.errorText.contains("1 key longer than import's limit"), "\(run.errorText)")
    }

    @Test("import - reads standard input: checked whole before anything is written, then imported")
    func standardInput() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let entries = (0..<3).map { index in
            ExportFormat.Entry(
                key: Array("k\(index)".utf8), value: SampleCache.value(index), created: 10, accessed: 20, expires: nil)
        }
        let good = ExportFormat.header + "\n" + entries.map { $0.line + "\n" }.joined()

        let refused = dir.url.appendingPathComponent("refused").path
        try CacheDumpRun(["import", refused, "-"], input: Array((good + "not json\n").utf8))
            .expectFailure(7, mentioning: "standard input:5: not an entry")
        #expect(!FileManager.default.fileExists(atPath: refused))

        let target = TemporaryDirectory()
        defer { target.remove() }
        let run = try CacheDumpRun(["import", target.path, "-"], input: Array(good.utf8))
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.text == "imported 3 entries; skipped 0 expired\n")
        let imported = try TransferCommandTests.entries(target)
        #expect(imported.map(\.key) == entries.map(\.key))
        #expect(imported.map { $0.value ?? [] } == entries.map(\.value))
        #expect(imported.allSatisfy { $0.created == 10 && $0.accessed == 20 })
    }
}

extension ImportLimitTests {
    /// Writes `file` (created, or emptied) through `body`'s calls, a piece at a time.
    static func writeFile(_ file: String, _ body: ((([UInt8]) -> Void)) throws -> Void) throws {
        _ = FileManager.default.createFile(atPath: file, contents: nil)
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: file))
        defer { try? handle.close() }
        var failure: (any Error)?
        try body { bytes in
            guard failure == nil else { return }
            do { try handle.write(contentsOf: bytes) } catch { failure = error }
        }
        if let failure { throw failure }
    }
}
