import LMDBCacheStorage

// The access index's stale entries. An overwrite, or a use the writer records, moves an entry in
// the access order. Deleting its old index entry would cost a search and a page at a random place
// in the index, as many pages as the record itself dirties; instead the batch leaves the old entry
// behind, stale. An index entry is live when its time is its entry's current last access
// (`DiskDatabases.lastAccess`), and whatever reads the index checks that: trimming drops the stale
// entries it meets at the front without counting them as evictions (`evictThroughIndex`), the
// oldest access skips them, verification counts them apart. The rest are swept here: once the
// index holds more stale entries than live ones (and more than `staleAccessAllowance`), each
// batch examines a slice of it after where the last sweep stopped and deletes the stale entries
// there, so the index stays under about twice the store's entries.
extension DiskStore {
    /// Stale access entries a store may hold besides its live ones before batches sweep: as many as
    /// its live entries, and at least this many.
    static let staleAccessAllowance = 1_024

    /// Index entries a sweep examines for each entry its batch left behind: with at least half
    /// the examined entries stale, a sweep deletes twice what its batch added.
    static let sweepRatio = 4

    /// True when the access index's entry (`time`, `key`) is its entry's current one. An entry
    /// whose record's header is damaged counts as live: trimming reaches the record through it.
    func isLiveAccessEntry(time: UInt64, key: [UInt8], _ txn: some TransactionReading) throws -> Bool {
        guard let bytes = try txn.get(db.records, key) else { return false }
        guard let header = Record.Header(bytes) else { return true }
        return try db.lastAccess(txn, key, created: header.created) == time
    }

    /// The time of the store's least recently used entry: the access index's first live entry
    /// (0 when the index is empty). Past the first `oldestAccessScan` entries, all stale, the time
    /// of the last one examined, which is no later than the live one.
    func oldestAccessTime(_ txn: some TransactionReading) throws -> UInt64 {
        var oldest: UInt64 = 0
        var examined = 0
        // A bounded walk: keys out of order on a damaged page cannot keep it going, and a store
        // with one still opens (trimming and verification report the damage).
        try txn.forEach(db.access, bytewiseOrdered: false) { indexKey, _ in
            let (time, key) = DiskDatabases.parseIndexKey(Array(indexKey))
            oldest = time
            examined += 1
            return try examined < Self.oldestAccessScan && !isLiveAccessEntry(time: time, key: key, txn)
        }
        return oldest
    }

    /// Entries ``oldestAccessTime(_:)`` examines at most.
    static let oldestAccessScan = 16

    /// After a batch that left `left` access entries behind, with `live` entries stored: when the
    /// index holds more stale entries than allowed, examines `sweepRatio` × `left` entries (at
    /// least ``trimBatchSize``) from where the last sweep stopped and deletes the stale ones.
    /// Returns the entries deleted.
    func sweepStaleAccessEntries(left: Int, live: Int, _ txn: WriteTransaction) throws -> Int {
        let entries = try txn.count(db.access)
        guard live >= 0, entries > live, entries - live > max(live, Self.staleAccessAllowance) else { return 0 }
        let budget = max(Self.sweepRatio * max(left, 0), Self.trimBatchSize)
        var examined = 0
        var next: [UInt8]?
        var stale: [[UInt8]] = []
        // Collected first: the index changes only after the walk. Bounded, so it need not check
        // the order of the keys: a damaged page fails no batch here (trimming reports it).
        try txn.forEach(db.access, from: accessSweepPosition.withLock { $0 }, bytewiseOrdered: false) {
            indexKey, _ in
            let stored = Array(indexKey)
            guard examined < budget else {
                next = stored
                return false
            }
            examined += 1
            let (time, key) = DiskDatabases.parseIndexKey(stored)
            if try !isLiveAccessEntry(time: time, key: key, txn) { stale.append(stored) }
            return true
        }
        for indexKey in stale { try txn.delete(db.access, indexKey) }
        // At the end of the index the next sweep starts again at its front. A transaction
        // replayed after the map grew sweeps on from here: it only skips a slice until next time.
        accessSweepPosition.withLock { $0 = next }
        return stale.count
    }
}
