import CLMDB
import Glibc

/// One slot of LMDB's reader table (in `lock.mdb`): a process that has, or had, a read
/// transaction open.
package struct ReaderSlot: Sendable, Equatable {
    /// The process holding the slot.
    package var processID: Int32
    /// The thread, as LMDB prints it (hexadecimal).
    package var thread: String
    /// The snapshot the slot reads, or nil when its transaction is idle (reset).
    package var transaction: Int?
    /// False when the process has exited: the slot is stale and `mdb_reader_check` frees it.
    package var processIsAlive: Bool
}

/// The size and use of a store's data file, as LMDB reports them.
struct PageStatistics: Sendable {
    var pageSize: Int
    /// Pages from the start of the file up to the last one ever used.
    var pagesUsedOrFree: Int
    /// Pages in that range that are free (listed in LMDB's free list) and reused by later writes.
    var freePages: Int
    var mapSize: Int
}

extension Environment {
    /// Every reader-table slot in use (this process's idle pooled transactions included), with
    /// whether its process is still running.
    func readerSlots() throws -> [ReaderSlot] {
        final class Lines {
            var lines: [String] = []
        }
        let collected = Lines()
        try withEnvironmentPointer { env in
            _ = mdb_reader_list(
                env,
                { message, context in
                    guard let message, let context else { return 0 }
                    Unmanaged<Lines>.fromOpaque(context).takeUnretainedValue().lines.append(String(cString: message))
                    return 0
                }, Unmanaged.passUnretained(collected).toOpaque())
        }
        // A header line ("pid thread txnid"), then "pid thread txnid|-" per slot, or "(no active readers)".
        return collected.lines.compactMap { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\n" })
            guard fields.count == 3, let pid = Int32(fields[0]) else { return nil }
            let alive = kill(pid, 0) == 0 || errno != ESRCH
            return ReaderSlot(
                processID: pid, thread: String(fields[1]), transaction: Int(fields[2]), processIsAlive: alive)
        }
    }

    /// The data file's page size, extent and free pages. Reads LMDB's free list (database 0) in
    /// one read transaction: O(free-list entries).
    func pageStatistics() throws -> PageStatistics {
        let (pageSize, lastPage, mapSize) = try withEnvironmentPointer { env in
            var stat = MDB_stat()
            mdb_env_stat(env, &stat)
            var info = MDB_envinfo()
            mdb_env_info(env, &info)
            return (Int(stat.ms_psize), info.me_last_pgno, info.me_mapsize)
        }
        var free = 0
        try read { txn in
            // Each free-list value is an ID list: a count, then that many page numbers.
            // The free list's keys are native integers (MDB_INTEGERKEY), not in byte order.
            try txn.forEach(Database(handle: 0), bytewiseOrdered: false) { _, value in
                if value.count >= MemoryLayout<Int>.size {
                    free += value.loadUnaligned(as: Int.self)
                }
                return true
            }
        }
        return PageStatistics(pageSize: pageSize, pagesUsedOrFree: lastPage + 1, freePages: free, mapSize: mapSize)
    }
}
