import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("cache-dump verify and repair")
struct VerifyCommandTests {
    @Test("verify passes a healthy cache with status 0")
    func clean() throws {
        let cache = try SampleCache(count: 200)
        defer { cache.remove() }
        let run = try CacheDumpRun(["verify", cache.path])
        #expect(run.status == 0)
        #expect(run.text == "200 records checked: no problems\n")
    }

    @Test("verify finds bytes flipped in the data file; --repair removes the record and leaves a clean cache")
    func flippedBytes() throws {
        let cache = try SampleCache(count: 100)
        defer { cache.remove() }
        let victim = sampleBytes(count: 3_000, compressible: false, seed: 999)
        do {
            let disk = try cache.open()
            defer { disk.close() }
            try disk.setData(victim, forKey: "victim")
            try disk.flush()
        }
        let file = cache.directory.url.appendingPathComponent("data.mdb")
        var data = [UInt8](try Data(contentsOf: file))
        let marker = Array(victim[0..<64])
        var flipped = 0
        var offset = 0
        // Every copy of the value (LMDB may keep an older one in a free page) gets one byte flipped.
        while let found = Self.find(marker, in: data, from: offset) {
            data[found + 1_000] ^= 0x5a
            flipped += 1
            offset = found + 1
        }
        #expect(flipped >= 1)
        try Data(data).write(to: file)

        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("damaged record victim: checksum mismatch"), "\(found.text)")
        #expect(found.lines.last == "101 records checked: 1 problem")
        try CacheDumpRun(["get", cache.path, "victim"]).expectFailure(4, mentioning: "damaged (checksum mismatch)")

        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        #expect(repaired.text.contains("repaired: removed 1 damaged record and"))
        #expect(repaired.lines.last == "100 records checked: no problems")
        #expect(try CacheDumpRun(["verify", cache.path]).status == 0)
        #expect(try CacheDumpRun(["get", cache.path, "victim"]).status == 2)
        for index in 0..<100 {
            #expect(try CacheDumpRun(["get", cache.path, "key\(index)"]).output == SampleCache.value(index))
        }
    }

    @Test("verify finds an emptied index and wrong totals; --repair rebuilds both")
    func indexesAndTotals() throws {
        let cache = try SampleCache(count: 40)
        defer { cache.remove() }
        try cache.tamper { store, txn in
            try txn.empty(store.db.expiry)
            try Totals(count: 999, bytes: 1).save(txn, store.db.info)
        }
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("expiry index holds 0 entries for 10 expiring records"), "\(found.text)")
        #expect(found.lines.contains("totals say 999 entries; the records number 40"))
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text)")
        #expect(repaired.text.contains("rebuilt 40 access and 10 expiry index entries"))
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == 40)
        #expect(try disk.store.verify().isClean)
    }

    @Test("verify --repair refuses with status 6 while another process has the store open")
    func repairNeedsTheStoreAlone() throws {
        let cache = try SampleCache(count: 3)
        defer { cache.remove() }
        let holder = try HelperProcess(["hold", cache.path])
        defer { holder.kill() }
        #expect(holder.readLine() == "open")
        try CacheDumpRun(["verify", cache.path, "--repair"]).expectFailure(6, mentioning: "another process")
    }

    @Test(
        "verify draws a progress bar on standard error when it is a terminal, and none with --quiet",
        .enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), "needs util-linux script"))
    func progressOnATerminal() throws {
        let cache = try SampleCache(count: 5_000)
        defer { cache.remove() }
        // script(1) runs the command on a pseudo-terminal and copies what it shows to stdout.
        func onTerminal(_ arguments: String) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
            process.arguments = ["-qec", HelperProcess.executable("cache-dump").path + " " + arguments, "/dev/null"]
            let output = Pipe()
            process.standardOutput = output
            try process.run()
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            return String(decoding: data, as: UTF8.self)
        }
        let shown = try onTerminal("verify \(cache.path)")
        #expect(shown.contains("\rverify [") && shown.contains("4096/5000"), "\(shown.debugDescription)")
        #expect(shown.contains("\r\u{1b}[K5,000 records checked: no problems"), "the bar is cleared before the result")
        let quiet = try onTerminal("verify \(cache.path) --quiet")
        #expect(!quiet.contains("verify ["), "\(quiet.debugDescription)")
        #expect(!(try CacheDumpRun(["verify", cache.path]).errorText.contains("[")), "no bar off a terminal")
    }

    private static func find(_ needle: [UInt8], in haystack: [UInt8], from start: Int) -> Int? {
        guard haystack.count >= needle.count, start <= haystack.count - needle.count else { return nil }
        for index in start...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if haystack[index..<(index + needle.count)].elementsEqual(needle) { return index }
        }
        return nil
    }
}
