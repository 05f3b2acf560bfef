import Foundation

// What `cache-dump` needs beyond the public API: reading a store without recording accesses,
// scanning it in key order, importing entries with their own timestamps, reader slots. `package`
// access: visible to the targets of this package only.
extension DiskCache {
    /// Opens the existing store in `directory` to read it only: nothing in the directory is
    /// created or changed (LMDB's reader table in `lock.mdb` aside), no trimming runs, and a
    /// damaged store is reported, never set aside.
    ///
    /// - Throws: ``CacheError/directoryUnavailable(path:reason:)`` when `directory` holds no
    ///   store, ``CacheError/damagedStore(path:reason:)``, ``CacheError/unsupportedFormat(path:found:supported:)``.
    package static func openForInspection(directory: URL) throws -> DiskCache {
        var configuration = Configuration()
        configuration.readOnly = true
        configuration.automaticTrimming = false
        return try DiskCache(directory: directory, configuration: configuration)
    }

    /// The committed entry stored under `key`, expired or damaged ones included, with its value.
    /// Records no access. Nil when there is none.
    package func storedEntry(forKey key: [UInt8]) throws -> StoredEntry? {
        try withStore { store in
            let storageKey = try StorageKey(key)
            return try store.env.read { txn -> StoredEntry? in
                guard let bytes = try txn.get(store.db.records, storageKey.bytes) else { return nil }
                if let header = Record.Header(bytes), !Record.matches(bytes, header: header, key: storageKey) {
                    return nil
                }
                return try StoredEntry(
                    storedKey: storageKey.bytes, record: bytes,
                    accessed: { try store.db.lastAccess(txn, storageKey.bytes, created: $0) }, withValue: true)
            }
        }
    }

    /// Up to `limit` committed entries in stored-key order, starting after the stored key `after`
    /// (from the start when nil), whose key starts with `prefix`. Each call is one read
    /// transaction; pass the last entry's `storedKey` to continue. Records no access.
    package func storedEntries(
        after: [UInt8]?, prefix: [UInt8] = [], limit: Int, withValues: Bool
    ) throws -> [StoredEntry] {
        // Stored keys of long keys begin with the key's first `prefixLength` bytes.
        let storedPrefix = Array(prefix.prefix(StorageKey.prefixLength))
        return try withStore { store in
            try store.env.read { txn in
                var entries: [StoredEntry] = []
                try txn.forEach(store.db.records, from: after ?? (storedPrefix.isEmpty ? nil : storedPrefix)) {
                    key, bytes in
                    guard key.starts(with: storedPrefix) else { return false }
                    let storedKey = Array(key)
                    if let after, storedKey == after { return true }
                    let entry = try StoredEntry(
                        storedKey: storedKey, record: bytes,
                        accessed: { try store.db.lastAccess(txn, storedKey, created: $0) }, withValue: withValues)
                    if entry.key.starts(with: prefix) { entries.append(entry) }
                    return entries.count < limit
                }
                return entries
            }
        }
    }

    /// Counts, sizes, pages, readers and access range of the store: one scan of every record in
    /// one read transaction, O(n).
    package func storeStatistics() throws -> StoreStatistics {
        try withStore { store in
            var statistics = StoreStatistics()
            let now = configuration.clock.milliseconds
            try store.env.read { txn in
                let totals = try Totals(txn, store.db.info)
                statistics.recordedEntries = totals.count
                statistics.storedBytes = totals.bytes
                // Read from the file: never trusted to fit (a damaged value shows as Int.max).
                statistics.formatVersion = Int(clamping: try Totals.load(txn, store.db.info, Totals.formatKey))
                try txn.forEach(store.db.records) { key, bytes in
                    statistics.entries += 1
                    guard let header = try? Record.validate(bytes, storedKey: Array(key)) else {
                        statistics.damagedRecords += 1
                        return true
                    }
                    statistics.logicalBytes += header.valueLength
                    statistics.payloadBytes += bytes.count - Record.headerSize - header.keyLength
                    if header.flags.contains(.compressed) { statistics.compressedEntries += 1 }
                    return true
                }
                try txn.forEach(store.db.expiry) { key, _ in
                    guard DiskDatabases.parseIndexKey(Array(key)).time <= now else { return false }
                    statistics.expiredEntries += 1
                    return true
                }
                statistics.oldestAccess = try txn.firstKey(store.db.access).map { DiskDatabases.parseIndexKey($0).time }
                statistics.newestAccess = try txn.lastKey(store.db.access).map { DiskDatabases.parseIndexKey($0).time }
            }
            if statistics.payloadBytes > 0 {
                statistics.compressionRatio = Double(statistics.logicalBytes) / Double(statistics.payloadBytes)
            }
            let pages = try store.env.pageStatistics()
            statistics.pageSize = pages.pageSize
            statistics.freePages = pages.freePages
            statistics.pagesInUse = pages.pagesUsedOrFree - pages.freePages
            statistics.mapSize = pages.mapSize
            statistics.fileSize = store.fileSize
            let readers = try store.env.readerSlots()
            statistics.readerSlots = readers.count
            statistics.staleReaderSlots = readers.filter { $0.state == .stale }.count
            return statistics
        }
    }

    /// Stores `value` under `key` with the given timestamps (milliseconds since 1970; `expires`
    /// nil for never), as `cache-dump import` restores an export. Queued like ``setData(_:forKey:expiresAfter:)``.
    package func importEntry(
        _ value: [UInt8], forKey key: [UInt8], created: UInt64, accessed: UInt64, expires: UInt64?
    ) throws {
        let storageKey = try StorageKey(key)
        try write(value, forKey: key, now: created, expires: expires ?? 0)
        if accessed > created {
            try withStore { $0.recordAccess(storageKey, at: accessed, previous: created) }
        }
    }

    /// Reader-table slots in use, with the processes holding them.
    package func readerSlots() throws -> [ReaderSlot] {
        try withStore { try $0.env.readerSlots() }
    }

    /// Frees the reader slots of processes that have exited; returns how many.
    package func clearStaleReaderSlots() throws -> Int {
        try withStore { $0.env.clearStaleReaders() }
    }

    /// Checks every record (checksum, decompression), the access and expiry indexes and the
    /// totals against them. O(n log n), in one read transaction. `progress` hears the records
    /// checked so far, every few thousand.
    package func verify(progress: ((Int) -> Void)? = nil) throws -> VerificationReport {
        try withStore { try $0.verify(progress: progress) }
    }

    /// Removes damaged records and rebuilds the indexes and totals from the records. Needs the
    /// store to itself.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has it open.
    package func repair() throws -> RepairReport {
        try withStore { try $0.repair() }
    }
}
