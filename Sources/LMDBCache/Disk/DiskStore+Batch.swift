import LMDBCacheStorage

// What a batch does inside its write transaction: records and their index entries put or
// removed, read uses moved in the access order, damaged and unusable records removed, totals kept,
// and its writes and removals logged for other processes' memory tiers (DiskStore+ChangeLog.swift).
extension DiskStore {
    /// What applying a batch did: the totals after it, the bytes it added (negative when it
    /// freed more), the access updates it made and the oldest access after it.
    struct Applied {
        var totals: Totals
        var added: Int
        var moved: Int
        var oldestAccess: UInt64
    }

    /// Applies `batch` in `txn`.
    func apply(_ batch: WriteBatch, _ txn: WriteTransaction) throws -> Applied {
        var totals = try Totals(txn, db.info)
        let before = totals
        // Access index entries left behind, stale, for the sweep.
        var left = 0
        for write in batch.writes {
            let record: [UInt8]
            switch write.operation {
            case .set(let built): record = built
            case .setDeflatingLater(let deferred): record = deferred.record(for: write.key)  // built above
            case .remove:
                try removeEntry(write.key.bytes, txn, &totals)
                continue
            }
            try record.withUnsafeBytes { bytes in
                // One search when the key is new; an overwrite removes the old record's index
                // entries, leaving its access index entry behind, stale (DiskStore+AccessIndex.swift),
                // and replaces it in place.
                if let stored = try txn.putUnlessPresent(db.records, write.key.bytes, bytes) {
                    try unindex(write.key.bytes, stored: stored, txn, &totals, leavingAccessEntry: true)
                    left += 1
                    try txn.put(db.records, write.key.bytes, bytes)
                }
                let header = Record.Header(bytes)!
                try txn.put(db.access, DiskDatabases.indexKey(time: header.created, key: write.key.bytes), [])
                // Keyed by when trimming removes the record: the end of its stale window, if any.
                if header.removalDeadline != 0 {
                    try txn.put(
                        db.expiry, DiskDatabases.indexKey(time: header.removalDeadline, key: write.key.bytes), [])
                }
                for tag in Record.tags(bytes, header: header).bytes {
                    try txn.put(db.tags, DiskDatabases.tagIndexKey(tag: tag, key: write.key.bytes), [])
                }
            }
            totals.count += 1
            totals.bytes += Totals.cost(keyLength: write.key.bytes.count, recordLength: record.count)
        }
        // Two lookups and two small writes an access: when the record the reader saw is still
        // stored (its write time) and the use is newer than its last, the use becomes its last
        // access and its index entry is put at that time; the old one is left behind, stale.
        var moved = 0
        for (key, update) in batch.accesses {
            guard let bytes = try txn.get(db.records, key.bytes), Record.Header(bytes)?.created == update.created
            else { continue }
            let accessed = try db.lastAccess(txn, key.bytes, created: update.created)
            guard accessed < update.time else { continue }
            try withUnsafeBytes(of: update.time.littleEndian) { try txn.put(db.lastAccess, key.bytes, $0) }
            try txn.put(db.access, DiskDatabases.indexKey(time: update.time, key: key.bytes), [])
            moved += 1
            left += 1
        }
        for key in batch.damaged {
            guard let bytes = try txn.get(db.records, key.bytes) else { continue }
            if (try? Record.validate(bytes, storedKey: key.bytes)) == nil {
                try removeEntry(key.bytes, txn, &totals)
            }
        }
        // After the batch's writes, in the same transaction: a write queued before the check
        // replaced the record and is kept; one queued after it commits after the removal.
        for (key, identity) in batch.removalsIfUnchanged {
            guard let bytes = try txn.get(db.records, key.bytes), RecordIdentity(bytes) == identity else { continue }
            try removeEntry(key.bytes, txn, &totals)
        }
        if totals != before { try totals.save(txn, db.info) }
        _ = try sweepStaleAccessEntries(left: left, live: totals.count, txn)
        try appendChanges(count: batch.writes.count, txn) { index, time, buffer in
            let write = batch.writes[index]
            CacheChange.encode(kind: .key, origin: write.origin, time: time, subject: write.key.key, into: &buffer)
        }
        return Applied(
            totals: totals, added: totals.bytes - before.bytes, moved: moved, oldestAccess: try oldestAccessTime(txn))
    }

    /// Removes the entry stored under `key` with its index entries, if there is one. Returns
    /// whether an entry was removed.
    @discardableResult
    func removeEntry(_ key: [UInt8], _ txn: WriteTransaction, _ totals: inout Totals) throws -> Bool {
        guard let bytes = try txn.get(db.records, key) else { return false }
        try unindex(key, stored: bytes, txn, &totals)
        try txn.delete(db.records, key)
        return true
    }

    /// Removes the index entries of `stored`, the record under `key`, and takes it off `totals`;
    /// the record itself stays for the caller to delete or replace. With `leavingAccessEntry` (an
    /// overwrite, whose new access entry follows), its access index entry stays, stale.
    private func unindex(
        _ key: [UInt8], stored bytes: UnsafeRawBufferPointer, _ txn: WriteTransaction, _ totals: inout Totals,
        leavingAccessEntry: Bool = false
    ) throws {
        let cost = Totals.cost(keyLength: key.count, recordLength: bytes.count)
        let header = Record.Header(bytes)
        // `bytes` points into the map: read all of it before the first change.
        let tags = header.map { Record.tags(bytes, header: $0) } ?? .none
        if let header {
            if !leavingAccessEntry {
                let accessed = try db.lastAccess(txn, key, created: header.created)
                try txn.delete(db.access, DiskDatabases.indexKey(time: accessed, key: key))
            }
            if header.removalDeadline != 0 {
                try txn.delete(db.expiry, DiskDatabases.indexKey(time: header.removalDeadline, key: key))
            }
            for tag in tags.bytes { try txn.delete(db.tags, DiskDatabases.tagIndexKey(tag: tag, key: key)) }
        }
        // A record with a damaged header leaves index entries behind; trimming drops them when it
        // reaches them (see `evictThroughIndex`).
        try txn.delete(db.lastAccess, key)
        totals.count -= 1
        totals.bytes -= cost
    }
}
