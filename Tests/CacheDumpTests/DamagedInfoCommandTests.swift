import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

/// Integers `cache-dump` reads from the file are untrusted: damage is reported, never a trap.
@Suite("cache-dump on damaged integers in the info database and the indexes")
struct DamagedInfoCommandTests {
    @Test("stats and verify report totals above Int.max and access times past Int.max; --repair fixes the totals")
    func totalsAndTimesAboveIntMax() throws {
        let cache = try SampleCache(count: 12)
        defer { cache.remove() }
        try cache.tamper { store, txn in
            try Totals.store(txn, store.db.info, Totals.countKey, 1 << 63)
            try Totals.store(txn, store.db.info, Totals.bytesKey, .max)
            try txn.put(store.db.access, DiskDatabases.indexKey(time: .max, key: Array("ghost".utf8)), [])
        }
        let text = try CacheDumpRun(["stats", cache.path])
        #expect(text.status == 0, "\(text.errorText)")
        #expect(text.lines.first == "entries               12")
        let json = try CacheDumpRun(["stats", cache.path, "--json"])
        #expect(json.status == 0, "\(json.errorText)")
        let object = try #require(try json.json() as? [String: Any])
        #expect(object["recordedEntries"] as? Int == 0, "a count past Int.max reads as 0 (damaged)")
        #expect((object["newestAccess"] as? NSNumber)?.uint64Value == .max, "the stored time, as it is")
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("totals say 0 entries; the records number 12"), "\(found.text)")
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == 12)
    }

    @Test("a format with its top bit flipped fails every reading command with status 5")
    func formatTopBit() throws {
        let cache = try SampleCache(count: 2)
        defer { cache.remove() }
        try cache.tamper { store, txn in
            try Totals.store(txn, store.db.info, Totals.formatKey, 1 << 63 | UInt64(Record.formatVersion))
        }
        for command in ["stats", "verify", "export", "list"] {
            try CacheDumpRun([command, cache.path]).expectFailure(5, mentioning: "has record format \(Int.max)")
        }
    }
}
