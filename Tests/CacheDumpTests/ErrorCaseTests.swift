import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("cache-dump errors: one line on stderr and a documented exit status")
struct ErrorCaseTests {
    @Test("a path that is not a cache fails with status 3 and is left as it was")
    func notACache() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try CacheDumpRun(["stats", dir.path]).expectFailure(3, mentioning: "is not a cache directory")
        #expect(!FileManager.default.fileExists(atPath: dir.path), "nothing created")
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        for command in ["stats", "list", "verify", "export", "readers", "compact", "clear", "trim"] {
            let extra = command == "trim" ? ["--count", "1"] : command == "clear" ? ["--yes"] : []
            try CacheDumpRun([command, dir.path] + extra).expectFailure(3, mentioning: "it has no data.mdb")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).isEmpty, "nothing written")
        let file = dir.url.appendingPathComponent("plain-file")
        try Data([1]).write(to: file)
        try CacheDumpRun(["list", file.path]).expectFailure(3, mentioning: "it is not a directory")
    }

    @Test("a store written by a newer format version fails with status 5")
    func newerFormat() throws {
        let cache = try SampleCache(count: 2)
        defer { cache.remove() }
        try cache.tamper { store, txn in try Totals.store(txn, store.db.info, Totals.formatKey, 99) }
        for command in ["stats", "verify", "export"] {
            try CacheDumpRun([command, cache.path]).expectFailure(5, mentioning: "has record format 99")
        }
    }

    @Test("a damaged store fails with status 4 and is not set aside")
    func damagedStore() throws {
        let cache = try SampleCache(count: 20)
        defer { cache.remove() }
        let file = cache.directory.url.appendingPathComponent("data.mdb")
        var data = [UInt8](try Data(contentsOf: file))
        // Both meta pages (the first two 4 KiB pages) overwritten: LMDB cannot find a valid root.
        for index in 0..<8_192 { data[index] = 0xee }
        try Data(data).write(to: file)
        for command in ["stats", "list", "verify", "export", "get"] {
            let extra = command == "get" ? ["key1"] : []
            try CacheDumpRun([command, cache.path] + extra).expectFailure(4, mentioning: "is damaged")
        }
        try CacheDumpRun(["put", cache.path, "k"], input: [1]).expectFailure(4, mentioning: "is damaged")
        #expect([UInt8](try Data(contentsOf: file)) == data, "the damaged file is left for the user")
        let names = try FileManager.default.contentsOfDirectory(atPath: cache.path)
        #expect(!names.contains { $0.hasPrefix("data.mdb.damaged") })
    }

    @Test("a symbolic link among the store's files is refused with status 8; its target is untouched")
    func symbolicLinks() throws {
        let cache = try SampleCache(count: 2)
        defer { cache.remove() }
        let outside = TemporaryDirectory()
        defer { outside.remove() }
        try FileManager.default.createDirectory(at: outside.url, withIntermediateDirectories: true)
        let target = outside.url.appendingPathComponent("precious")
        try Data("keep me".utf8).write(to: target)
        let lock = cache.directory.url.appendingPathComponent("lock.mdb")
        try FileManager.default.removeItem(at: lock)
        try FileManager.default.createSymbolicLink(at: lock, withDestinationURL: target)
        for command in ["stats", "verify", "compact", "readers"] {
            try CacheDumpRun([command, cache.path]).expectFailure(8, mentioning: "refusing to follow the symbolic link")
        }
        try CacheDumpRun(["put", cache.path, "k"], input: [1]).expectFailure(8, mentioning: target.path)
        #expect(try Data(contentsOf: target) == Data("keep me".utf8))
    }

    @Test("commands that only read change nothing in the directory but LMDB's reader table")
    func readingChangesNothing() throws {
        let cache = try SampleCache(count: 50)
        defer { cache.remove() }
        let file = cache.path + "/data.mdb"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        let names = try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted()
        let modified = try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date
        for arguments in [
            ["stats"], ["stats", "--json"], ["list"], ["list", "--sort", "access"], ["get", "key3"], ["verify"],
            ["export"], ["readers"],
        ] {
            let full = [arguments[0], cache.path] + arguments.dropFirst()
            #expect(try CacheDumpRun(full).status == 0, "\(full)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted() == names)
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date == modified)
    }

    @Test("a wrong command line fails with status 64 and says what is wrong")
    func usage() throws {
        let cache = try SampleCache(count: 1)
        defer { cache.remove() }
        let cases: [([String], String)] = [
            (["trim", cache.path], "give at least one of --count"),
            (["trim", cache.path, "--age", "soon"], "--age"),
            (["list", cache.path, "--sort", "colour"], "--sort"),
            (["frobnicate", cache.path], "frobnicate"),
            (["rm", cache.path], "key"),
        ]
        for (arguments, fragment) in cases {
            let run = try CacheDumpRun(arguments)
            #expect(run.status == 64, "\(arguments): \(run.errorText)")
            #expect(run.errorText.contains(fragment), "\(arguments): \(run.errorText)")
            #expect(!run.errorText.contains("Fatal error"))
        }
    }
}
