import LMDBCacheStorage

// The access index's stale entries. An overwrite, or a use the writer records, moves an entry in
// the access order. Deleting its old index entry would cost a search and a page at a random place
// in the index, as many pages as the record itself dirties; instead the batch leaves the old entry
// behind, stale. An index entry is live when its time is its entry's current last access
// (`DiskDatabases.lastAccess`), and whatever reads the index checks that: trimming drops the stale
// entries it meets at the front without counting them as evictions (`evictThroughIndex`), the
// oldest access skips them, verification counts them apart. Each batch drops the stale entries
// at the front of the index (so its first entry is the least recently used one, which sets the
// precision reads record uses with), and once the index holds more stale entries than live ones
// (and more than `staleAccessAllowance`) it also sweeps a slice of the index after where the last
// sweep stopped, so the stale entries stay about as many as the live ones.
//
// Both are upkeep: a walk that meets a damaged page (keys out of order, a key too short to hold
// a time and a stored key) stops without failing the batch; trimming and verification report it.
extension DiskStore {
    /// Stale access entries a store may hold besides its live ones before batches sweep: as many as
    /// its live entries, and at least this many.
    static let staleAccessAllowance = 1_024

    /// Index entries a sweep examines for each entry its batch left behind: with at least half
    /// the examined entries stale, a sweep deletes twice what its batch added.
    static let sweepRatio = 4

    /// True when the access index's entry (`time`, `key`) is its entry's current one. An entry
    /// whose record's header is damaged counts as live: trimming reaches the record through it.
    func isLiveAccessEntry(time: UInt64, key: UnsafeRawBufferPointer, _ txn: some TransactionReading) throws -> Bool {
        // An index key of 8 bytes or fewer (a damaged one) names no stored key: LMDB refuses an
        // empty key.
        guard !key.isEmpty, let bytes = try txn.get(db.records, rawKey: key) else { return false }
        guard let header = Record.Header(bytes) else { return true }
        return try db.lastAccess(txn, rawKey: key, created: header.created) == time
    }

    /// The time of the store's least recently used entry: the access index's first live entry
    /// (0 when the index is empty). Past the first `oldestAccessScan` entries, all stale, the time
    /// of the last one examined, which is no later than the live one; batches drop the stale
    /// entries at the front, so that is rare.
    func oldestAccessTime(_ txn: some TransactionReading) throws -> UInt64 {
        var oldest: UInt64 = 0
        var examined = 0
        try walkAccessIndex(txn) { _, time, key in
            oldest = time
            examined += 1
            return try examined < Self.oldestAccessScan && !isLiveAccessEntry(time: time, key: key, txn)
        }
        return oldest
    }

    /// Entries ``oldestAccessTime(_:)`` examines at most.
    static let oldestAccessScan = 16

    /// Deletes the stale entries at the front of the access index, up to the first live one and
    /// at most `budget` of them. Returns the entries deleted.
    func dropStaleAccessEntriesAtFront(budget: Int, _ txn: WriteTransaction) throws -> Int {
        var stale: [[UInt8]] = []
        try walkAccessIndex(txn) { indexKey, time, key in
            guard stale.count < budget, try !isLiveAccessEntry(time: time, key: key, txn) else { return false }
            stale.append(Array(indexKey))
            return true
        }
        for indexKey in stale { try txn.delete(db.access, indexKey) }
        return stale.count
    }

    /// Calls `body` with each access index key from `start` (the front when nil), its time and
    /// its stored key (both in LMDB's buffer: valid until the walk goes on), until it returns
    /// false. An upkeep walk: keys it cannot read (a damaged page) end it quietly. Index keys of 8
    /// bytes or fewer come with an empty stored key. Allocates nothing per entry.
    private func walkAccessIndex(
        _ txn: some TransactionReading, from start: [UInt8]? = nil,
        _ body: (_ indexKey: UnsafeRawBufferPointer, _ time: UInt64, _ key: UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        do {
            try txn.forEach(db.access, from: start) { indexKey, _ in
                let (time, key) = DiskDatabases.parseIndexKey(indexKey)
                return try body(indexKey, time, key)
            }
        } catch StorageError.damagedStore {
            return
        }
    }

    /// After a batch that left `left` access entries behind, with `live` entries stored: drops
    /// the stale entries at the front (at most the larger of ``trimBatchSize`` and `sweepRatio` ×
    /// `left`), and when the index holds more stale entries than allowed, examines as many from
    /// where the last sweep stopped and deletes the stale ones. Returns the entries deleted.
    func sweepStaleAccessEntries(left: Int, live: Int, _ txn: WriteTransaction) throws -> Int {
        let budget = max(Self.sweepRatio * max(left, 0), Self.trimBatchSize)
        let atFront = try dropStaleAccessEntriesAtFront(budget: budget, txn)
        let entries = try txn.count(db.access)
        guard live >= 0, entries > live, entries - live > max(live, Self.staleAccessAllowance) else { return atFront }
        var examined = 0
        var next: [UInt8]?
        var stale: [[UInt8]] = []
        // Collected first: the index changes only after the walk. A walk ended by a damaged page
        // starts the next sweep at the front again.
        try walkAccessIndex(txn, from: accessSweepPosition.withLock { $0 }) { indexKey, time, key in
            guard examined < budget else {
                next = Array(indexKey)
                return false
            }
            examined += 1
            if try !isLiveAccessEntry(time: time, key: key, txn) { stale.append(Array(indexKey)) }
            return true
        }
        for indexKey in stale { try txn.delete(db.access, indexKey) }
        // At the end of the index the next sweep starts again at its front. A transaction
        // replayed after the map grew sweeps on from here: it only skips a slice until next time.
        accessSweepPosition.withLock { $0 = next }
        return atFront + stale.count
    }
}
