import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

@Suite("cache-dump changes nothing until it is told to")
struct CreatesNothingTests {
    @Test("declining clear leaves the store as it was: not opened for writing, its format not upgraded")
    func declinedClearChangesNothing() throws {
        let cache = try SampleCache(count: 5)
        defer { cache.remove() }
        // Format 1: a writing open would upgrade it (and so change data.mdb).
        try cache.tamper { store, txn in try Totals.store(txn, store.db.info, Totals.formatKey, 1) }
        let file = cache.path + "/data.mdb"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        let names = try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted()

        let declined = try CacheDumpRun(["clear", cache.path], input: Array("n\n".utf8))
        #expect(declined.status == 10, "\(declined.errorText)")
        #expect(declined.errorText.contains("Remove all 5 entries"), "it still says how many: \(declined.errorText)")

        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before, "data.mdb unchanged")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted() == names)
        let disk = try DiskCache.openForInspection(directory: cache.directory.url)
        defer { disk.close() }
        let format = try disk.store.env.read { txn in try Totals.load(txn, disk.store.db.info, Totals.formatKey) }
        #expect(format == 1, "the format was not upgraded")
        #expect(disk.totalCount == 5)
    }

    @Test("read-only commands on a store without lock.mdb create none (nor any other file)")
    func readOnlyCommandsCreateNoLockFile() throws {
        let cache = try SampleCache(count: 20)
        defer { cache.remove() }
        try FileManager.default.removeItem(atPath: cache.path + "/lock.mdb")
        let file = cache.path + "/data.mdb"
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        let names = try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted()
        for arguments in [
            ["stats"], ["stats", "--json"], ["list"], ["list", "--sort", "access"], ["get", "key3"], ["verify"],
            ["export"], ["readers"],
        ] {
            let full = [arguments[0], cache.path] + arguments.dropFirst()
            let run = try CacheDumpRun(full)
            #expect(run.status == 0, "\(full): \(run.errorText)")
            #expect(
                !FileManager.default.fileExists(atPath: cache.path + "/lock.mdb"), "\(full) created lock.mdb")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: cache.path).sorted() == names)
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before)
        // The library opens it as usual afterwards.
        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.data(forKey: "key3") == SampleCache.value(3))
    }
}
