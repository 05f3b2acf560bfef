import Foundation
import Testing

@testable import LMDBCache

/// Review of issue 19: `DiskStore.changes(after:limit:)` advances `expected += 1` after taking
/// the entry numbered `expected`; when that is `UInt64.max` (a head and an entry read from a
/// damaged file), the add traps, in the follower's timer, and takes the process down. Values
/// read from the file are untrusted: a poll must drop the memory tier, never trap. Run in a
/// child process (an exit test), so the trap fails this test only.
@Suite("Review 19: a change log head at UInt64.max")
struct ChangeLogHeadReviewTests {
    @Test("a follower reading an entry numbered UInt64.max does not trap")
    func entryAtTheTopOfTheRange() async {
        await #expect(processExitsWith: .success) {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let disk = try ChangeLogTests.openDisk(dir)
            // A damaged head the follower starts from...
            try ChangeLogTests.write(disk) { store, txn in
                try Totals.store(txn, store.db.info, DiskStore.changeHeadKey, .max - 1)
            }
            let follower = try ChangeLogTests.openCache(dir)
            // ...then a head and an entry at the top of the range.
            try ChangeLogTests.write(disk) { store, txn in
                try Totals.store(txn, store.db.info, DiskStore.changeHeadKey, .max)
                try txn.put(
                    store.db.changes, DiskStore.changeKey(.max),
                    CacheChange(kind: .key, origin: 7, subject: Array("k".utf8)).encoded)
            }
            follower.followChanges()
            follower.close()
            disk.close()
        }
    }
}
