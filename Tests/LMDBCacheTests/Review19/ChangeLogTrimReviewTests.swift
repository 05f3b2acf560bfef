import Foundation
import Testing

@testable import LMDBCache

/// Review of issue 19: the change log's trim after its head started over
/// (DiskStore+ChangeLog.swift, `appendChanges`). The trim walks the log oldest first and stops
/// at the first entry it keeps; after a restart that is sequence 1, so the entries numbered
/// past the new head (written just before the restart) are never reached, though the comment
/// says they "go too". They stay past the capacity bound, and `verify` reports them as bad.
@Suite("Review 19: the change log after its head started over")
struct ChangeLogTrimReviewTests {
    /// A store whose head is set `before` changes short of the restart, then `writes` writes.
    static func restarted(_ dir: TemporaryDirectory, before: UInt64, writes: Int) throws -> DiskCache {
        let disk = try ChangeLogTests.openDisk(dir)
        try ChangeLogTests.write(disk) { store, txn in
            try Totals.store(
                txn, store.db.info, DiskStore.changeHeadKey, .max - DiskStore.changeLogCapacity - before)
        }
        for index in 0..<writes {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            try disk.flush()
        }
        return disk
    }

    static func check(_ disk: DiskCache) throws -> DiskStore.ChangeLogCheck {
        try disk.withStore { store in try store.env.read { try store.checkChangeLog($0) } }
    }

    @Test("once the head starts over, no entry is left numbered past it")
    func noEntriesPastTheHead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // Three writes land at .max - capacity - 2 ... .max - capacity, the next three at 1, 2, 3.
        let disk = try Self.restarted(dir, before: 3, writes: 6)
        defer { disk.close() }
        #expect(try ChangeLogTests.head(disk) == 3, "the head started over at 1")
        let check = try Self.check(disk)
        #expect(check.pastHead == 0, "\(check.pastHead) entries are numbered past the head (\(check.head))")
        #expect(check.bad == 0, "verify would report the log as damaged after a restart the code handles")
        #expect(check.entries == 3, "the log holds \(check.entries) entries; 3 were written since the restart")
    }

    @Test("after a restart the log still keeps at most its capacity")
    func capacityAfterRestart() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.restarted(dir, before: 100, writes: 101)
        defer { disk.close() }
        let capacity = Int(DiskStore.changeLogCapacity)
        let change = CacheChange(kind: .key, origin: 3, subject: [1])
        for _ in 0..<3 {
            try ChangeLogTests.write(disk) { store, txn in
                try store.appendChanges(Array(repeating: change, count: capacity / 2), txn)
            }
        }
        let shape = try ChangeLogTests.logShape(disk)
        #expect(shape.count <= capacity, "the log holds \(shape.count) entries for a capacity of \(capacity)")
        #expect(
            shape.last.flatMap(DiskStore.changeSequence) == (try ChangeLogTests.head(disk)),
            "its newest key is the head")
    }
}
