import CLMDB

/// The size and use of a store's data file, as LMDB reports them.
package struct PageStatistics: Sendable {
    package var pageSize: Int
    /// Pages from the start of the file up to the last one ever used.
    package var pagesUsedOrFree: Int
    /// Pages in that range that are free (listed in LMDB's free list) and reused by later writes.
    package var freePages: Int
    package var mapSize: Int
}

extension Environment {
    /// The data file's page size, extent and free pages. Reads LMDB's free list (database 0) in
    /// one read transaction: O(free-list entries).
    package func pageStatistics() throws -> PageStatistics {
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
