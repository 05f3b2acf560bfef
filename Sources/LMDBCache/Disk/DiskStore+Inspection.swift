import LMDBCacheStorage
// What `cache-dump` reads of a store beyond a lookup: entries with their metadata, scans in
// stored-key order, statistics, reader slots. None of it records an access.
extension DiskStore {
    /// The committed entry stored under `key`, expired or damaged ones included, with its value.
    /// Nil when there is none.
    func storedEntry(_ key: StorageKey) throws -> StoredEntry? {
        try env.read { txn -> StoredEntry? in
            guard let bytes = try txn.get(db.records, key.bytes) else { return nil }
            if let header = Record.Header(bytes), !Record.matches(bytes, header: header, key: key) {
                return nil
            }
            return try StoredEntry(
                storedKey: key.bytes, record: bytes,
                accessed: { try db.lastAccess(txn, key.bytes, created: $0) }, withValue: true)
        }
    }

    /// Up to `limit` committed entries in stored-key order, starting after the stored key `after`
    /// (from the start when nil), whose key starts with `prefix`; one read transaction.
    func storedEntries(after: [UInt8]?, prefix: [UInt8], limit: Int, withValues: Bool) throws -> [StoredEntry] {
        // Stored keys of long keys begin with the key's first `prefixLength` bytes.
        let storedPrefix = Array(prefix.prefix(StorageKey.prefixLength))
        return try env.read { txn in
            var entries: [StoredEntry] = []
            try txn.forEach(db.records, from: after ?? (storedPrefix.isEmpty ? nil : storedPrefix)) {
                key, bytes in
                guard key.starts(with: storedPrefix) else { return false }
                let storedKey = Array(key)
                if let after, storedKey == after { return true }
                let entry = try StoredEntry(
                    storedKey: storedKey, record: bytes,
                    accessed: { try db.lastAccess(txn, storedKey, created: $0) }, withValue: withValues)
                if entry.key.starts(with: prefix) { entries.append(entry) }
                return entries.count < limit
            }
            return entries
        }
    }

    /// The committed entries carrying the tag stored as `tag` (``EntryTags/storedBytes(of:)``),
    /// found through the tag index in one read transaction, in stored-key order (the index
    /// orders them by key under the tag's prefix). O(k log n) for k entries under the prefix.
    func storedEntries(taggedWith tag: [UInt8], withValues: Bool) throws -> [StoredEntry] {
        let prefix = EntryTags.indexPrefix(tag)
        return try env.read { txn in
            var entries: [StoredEntry] = []
            try txn.forEach(db.tags, from: prefix) { indexKey, _ in
                guard indexKey.starts(with: prefix) else { return false }
                let key = Array(indexKey.dropFirst(prefix.count))
                guard let bytes = try txn.get(db.records, key),
                    let header = try? Record.validate(bytes, storedKey: key),
                    Record.carries(bytes, header: header, tag: tag)
                else { return true }
                entries.append(
                    try StoredEntry(
                        storedKey: key, record: bytes, accessed: { try db.lastAccess(txn, key, created: $0) },
                        withValue: withValues))
                return true
            }
            return entries
        }
    }

    /// Counts, sizes, pages, readers and access range of the store, entries expired at `now`
    /// counted: one scan of every record in one read transaction, O(n).
    func statistics(now: UInt64) throws -> StoreStatistics {
        var statistics = StoreStatistics()
        try env.read { txn in
            let totals = try Totals(txn, db.info)
            statistics.recordedEntries = totals.count
            statistics.storedBytes = totals.bytes
            // Read from the file: never trusted to fit (a damaged value shows as Int.max).
            statistics.formatVersion = Int(clamping: try Totals.load(txn, db.info, Totals.formatKey))
            try txn.forEach(db.records) { key, bytes in
                statistics.entries += 1
                guard let header = try? Record.validate(bytes, storedKey: Array(key)) else {
                    statistics.damagedRecords += 1
                    return true
                }
                statistics.logicalBytes += header.valueLength
                statistics.payloadBytes += bytes.count - header.payloadOffset
                if header.flags.contains(.compressed) { statistics.compressedEntries += 1 }
                // From the record, not the expiry index: the index keys an entry with a stale
                // window by the window's end, which is past its expiry.
                if header.isExpired(at: now) { statistics.expiredEntries += 1 }
                return true
            }
            // Stale access entries (DiskStore+AccessIndex.swift) may outlive the last record.
            if statistics.entries > 0 {
                statistics.oldestAccess = try oldestAccessTime(txn)
                statistics.newestAccess = try txn.lastKey(db.access).map { DiskDatabases.parseIndexKey($0).time }
            }
        }
        if statistics.payloadBytes > 0 {
            statistics.compressionRatio = Double(statistics.logicalBytes) / Double(statistics.payloadBytes)
        }
        let pages = try env.pageStatistics()
        statistics.pageSize = pages.pageSize
        statistics.freePages = pages.freePages
        statistics.pagesInUse = pages.pagesUsedOrFree - pages.freePages
        statistics.mapSize = pages.mapSize
        statistics.fileSize = fileSize
        let readers = try readerSlots()
        statistics.readerSlots = readers.count
        statistics.staleReaderSlots = readers.filter { $0.state == .stale }.count
        return statistics
    }

    /// Reader-table slots in use, with the processes holding them.
    func readerSlots() throws -> [ReaderSlot] {
        try env.readerSlots()
    }

    /// Frees the reader slots of processes that have exited; returns how many.
    func clearStaleReaderSlots() -> Int {
        env.clearStaleReaders()
    }
}
