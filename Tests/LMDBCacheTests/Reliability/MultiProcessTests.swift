import Foundation
import Testing

@testable import LMDBCache

@Suite("Reliability: four processes on one directory, one killed", .serialized)
struct MultiProcessTests {
    /// Four real processes (`cache-test-helper mixed`) read, write, remove and trim the same 400
    /// keys for a fixed number of operations each (`LMDBCACHE_MIXED_OPERATIONS`, CI 3,000); the
    /// first is killed with SIGKILL halfway. Every value any process reads names its own key.
    @Test("totals equal a full scan, indexes are consistent, values are their keys', the killed reader slot is gone")
    func fourProcessesOneKilled() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let operations = SoakSettings.mixedOperations
        let helpers = try (0..<4).map { try HelperProcess(["mixed", dir.path, "\($0)", "\(operations)"]) }
        let victim = helpers[0]
        let halfway = "progress \(operations / 500 * 250)"
        var line = victim.readLine()
        while let current = line, current != halfway { line = victim.readLine() }
        try #require(line == halfway, "the first process reached \(halfway) before being killed")
        victim.kill()
        for (index, helper) in helpers.enumerated().dropFirst() {
            var last: String?
            while let next = helper.readLine() { last = next }
            #expect(last == "done \(operations)", "process \(index) finished its operations")
            #expect(helper.wait() == 0, "process \(index) exited cleanly (2 means it read a wrong value)")
        }

        let problems = try StoreCheck.problems(at: dir.url)
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        #expect(
            try !disk.store.env.readerSlots().contains { $0.processID == victim.processIdentifier },
            "the killed process's reader slot was cleared")
        #expect(disk.store.env.clearStaleReaders() == 0, "no reader slot of a dead process remains")
        let wrong = try disk.store.env.read { txn in
            var wrong: [String] = []
            try txn.forEach(disk.store.db.records) { key, record in
                let stored = String(decoding: key, as: UTF8.self)
                let header = try? Record.validate(record, storedKey: Array(key))
                let value = header.flatMap { try? Record.value(record, header: $0) }
                if value.map({ KeyedValue.isValid($0, forKey: stored) }) != true { wrong.append(stored) }
                return true
            }
            return wrong
        }
        #expect(wrong.isEmpty, "records that are not their key's value: \(wrong.prefix(10))")
    }
}
