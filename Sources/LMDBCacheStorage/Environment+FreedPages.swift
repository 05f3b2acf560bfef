import CLMDB

/// The pages counted so far as freed after the snapshot a `.periodic` store pinned at its last
/// sync: those of the free list's entries after `pinned`, through `through`.
struct FreedPages {
    var pinned = 0
    var through = 0
    var pages = 0
}

extension Environment {
    /// Bytes of the pages LMDB freed in commits after the snapshot the last sync pinned
    /// (``SyncedSnapshot``); 0 when nothing is pinned (the modes that sync every commit). None of
    /// them is reused before the next sync, so meanwhile every overwrite takes new pages and the
    /// file grows: the writer syncs once these reach its bound. Each call reads only the free-list
    /// entries added since the last (about one a commit). Writer thread only.
    package func bytesFreedSinceSync() throws -> Int {
        guard let pinned = syncedSnapshot?.pinnedTransaction else { return 0 }
        var count = freedSinceSync.withLock { $0 }
        // A new pin, or a store compacted in place (its transaction ids start again).
        if count.pinned != pinned { count = FreedPages(pinned: pinned, through: pinned, pages: 0) }
        let pageSize = try withEnvironmentPointer { env in
            var statistics = MDB_stat()
            try LMDBStatus.check(mdb_env_stat(env, &statistics), "mdb_env_stat", path: path)
            return Int(statistics.ms_psize)
        }
        try read { txn in
            var cursor: OpaquePointer?
            try LMDBStatus.check(mdb_cursor_open(txn.pointer, 0, &cursor), "mdb_cursor_open(free list)", path: path)
            defer { mdb_cursor_close(cursor) }
            // The free list's keys are transaction ids (native integers, MDB_INTEGERKEY); each
            // value is an ID list: a count, then that many page numbers. Read as untrusted: a key
            // not after the one before, or a count the value cannot hold, ends the walk.
            let word = MemoryLayout<Int>.size
            var start = count.through.addingReportingOverflow(1).partialValue
            let code = withUnsafeMutableBytes(of: &start) { bytes -> Int32 in
                var k = MDB_val(mv_size: word, mv_data: bytes.baseAddress)
                var v = MDB_val()
                var code = mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
                while code == MDB_SUCCESS {
                    guard k.mv_size == word, v.mv_size >= word, let key = k.mv_data, let value = v.mv_data else {
                        return MDB_NOTFOUND
                    }
                    let id = key.loadUnaligned(as: Int.self)
                    let listed = value.loadUnaligned(as: Int.self)
                    guard id > count.through, listed >= 0, listed < v.mv_size / word else { return MDB_NOTFOUND }
                    count.through = id
                    let (sum, overflow) = count.pages.addingReportingOverflow(listed)
                    count.pages = overflow ? .max : sum
                    code = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
                }
                return code
            }
            if code != MDB_NOTFOUND { try LMDBStatus.check(code, "mdb_cursor_get(free list)", path: path) }
        }
        freedSinceSync.withLock { $0 = count }
        let (bytes, overflow) = count.pages.multipliedReportingOverflow(by: pageSize)
        return overflow ? .max : bytes
    }
}
