import Foundation
import LMDBCacheStorage

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
        try withStore { try $0.storedEntry(try StorageKey(key)) }
    }

    /// Up to `limit` committed entries in stored-key order, starting after the stored key `after`
    /// (from the start when nil), whose key starts with `prefix`. Each call is one read
    /// transaction; pass the last entry's `storedKey` to continue. Records no access.
    package func storedEntries(
        after: [UInt8]?, prefix: [UInt8] = [], limit: Int, withValues: Bool
    ) throws -> [StoredEntry] {
        try withStore { try $0.storedEntries(after: after, prefix: prefix, limit: limit, withValues: withValues) }
    }

    /// The committed entries carrying `tag`, in stored-key order, found through the tag index in
    /// one read transaction.
    /// Call ``flush()`` first to see queued writes. Records no access.
    ///
    /// - Throws: ``CacheError/invalidTag(reason:)`` for an empty tag or one past 255 UTF-8 bytes
    ///   (no entry can carry it).
    package func storedEntries(taggedWith tag: String, withValues: Bool = false) throws -> [StoredEntry] {
        let bytes = try EntryTags.storedBytes(of: tag)
        return try withStore { try $0.storedEntries(taggedWith: bytes, withValues: withValues) }
    }

    /// Counts, sizes, pages, readers and access range of the store: one scan of every record in
    /// one read transaction, O(n).
    package func storeStatistics() throws -> StoreStatistics {
        try withStore { try $0.statistics(now: configuration.clock.milliseconds) }
    }

    /// Stores `value` under `key` with the given timestamps (milliseconds since 1970; `expires`
    /// nil for never), as `cache-dump import` restores an export. Queued like ``setData(_:forKey:expiresAfter:)``.
    package func importEntry(
        _ value: [UInt8], forKey key: [UInt8], created: UInt64, accessed: UInt64, expires: UInt64?
    ) throws {
        let storageKey = try StorageKey(key)
        try write(value, forKey: key, now: created, expires: expires ?? 0)
        if accessed > created {
            try withStore { $0.recordAccess(storageKey, at: accessed, created: created) }
        }
    }

    /// Reader-table slots in use, with the processes holding them.
    package func readerSlots() throws -> [ReaderSlot] {
        try withStore { try $0.readerSlots() }
    }

    /// Frees the reader slots of processes that have exited; returns how many.
    package func clearStaleReaderSlots() throws -> Int {
        try withStore { $0.clearStaleReaderSlots() }
    }

    /// Checks every record (checksum, decompression), the access, expiry and tag indexes and the
    /// totals against them, and the shape of the change log. O(n log n), in one read transaction.
    /// `progress` hears the records checked so far, every few thousand.
    package func verify(progress: ((Int) -> Void)? = nil) throws -> VerificationReport {
        try withStore { try $0.verify(progress: progress) }
    }

    /// Removes damaged records and rebuilds the indexes (the tag index included) and totals from
    /// the records; empties the change log, keeping its head, when an entry of it is bad. Needs
    /// the store to itself.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has it open.
    package func repair() throws -> RepairReport {
        try withStore { try $0.repair() }
    }
}
