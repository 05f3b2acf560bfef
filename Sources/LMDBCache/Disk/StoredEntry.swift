import LMDBCacheStorage
/// One entry as the store holds it, for tools that inspect a cache directory (`cache-dump`).
package struct StoredEntry: Sendable, Equatable {
    /// The key as the user gave it (the full key of a long key).
    package var key: [UInt8]
    /// The LMDB key it is stored under (a digest-suffixed prefix for long keys).
    package var storedKey: [UInt8]
    /// Bytes it occupies: stored key and record (what the cost limit counts).
    package var storedBytes: Int
    /// The value's length before compression.
    package var valueBytes: Int
    /// True when the payload is deflated.
    package var isCompressed: Bool
    /// Milliseconds since 1970 of the last write.
    package var created: UInt64
    /// Milliseconds since 1970 of the last read or write.
    package var accessed: UInt64
    /// Milliseconds since 1970 after which it is never returned; nil for never.
    package var expires: UInt64?
    /// Milliseconds since 1970 until which it is kept past `expires` for reads that ask for stale
    /// entries, and after which trimming removes it; nil for no stale window.
    package var staleUntil: UInt64?
    /// The tags it carries (``EntryTags/tags``: sorted by their stored bytes); empty for none.
    package var tags: [String] = []
    /// The value, when the caller asked for it.
    package var value: [UInt8]?
    /// Why the record cannot be read, when it is damaged (the other fields are then partial).
    package var damage: String?

    /// True when `expires` is at or before `now` (milliseconds since 1970).
    package func isExpired(at now: UInt64) -> Bool {
        expires.map { $0 <= now } ?? false
    }

    /// The entry for the record `bytes` stored under `storedKey`; with `withValue`, inflated.
    init(storedKey: [UInt8], record bytes: UnsafeRawBufferPointer, accessed: (UInt64) throws -> UInt64, withValue: Bool)
        rethrows
    {
        self.storedKey = storedKey
        key = storedKey
        storedBytes = Totals.cost(keyLength: storedKey.count, recordLength: bytes.count)
        valueBytes = 0
        isCompressed = false
        created = 0
        self.accessed = 0
        do throws(Record.Damage) {
            let header = try Record.validate(bytes, storedKey: storedKey)
            key = Record.fullKey(bytes, header: header) ?? storedKey
            valueBytes = header.valueLength
            isCompressed = header.flags.contains(.compressed)
            created = header.created
            expires = header.expires == 0 ? nil : header.expires
            staleUntil = header.staleUntil == 0 ? nil : header.staleUntil
            tags = Record.tags(bytes, header: header).tags
            if withValue || isCompressed {
                // A compressed payload is inflated even when not wanted: that is its check.
                let inflated = try Record.value(bytes, header: header)
                if withValue { value = inflated }
            }
        } catch {
            damage = error.description
            return
        }
        self.accessed = try accessed(created)
    }
}

/// What `cache-dump stats` shows of a store.
package struct StoreStatistics: Sendable, Equatable, Codable {
    /// Entries in the store (a scan's count).
    package var entries = 0
    /// Entry count as kept in the store's totals (equal to `entries` unless damaged).
    package var recordedEntries = 0
    /// Bytes of the values before compression.
    package var logicalBytes = 0
    /// Bytes the entries occupy (stored keys and records), as the cost limit counts them.
    package var storedBytes = 0
    /// Bytes of the stored payloads (compressed or not), without headers and keys.
    package var payloadBytes = 0
    /// Entries whose payload is deflated.
    package var compressedEntries = 0
    /// `logicalBytes / payloadBytes`: how much compression saved (1 when nothing is stored).
    package var compressionRatio = 1.0
    /// Bytes of `data.mdb`.
    package var fileSize = 0
    package var pageSize = 0
    /// Pages holding live data.
    package var pagesInUse = 0
    /// Pages in the file that are free for reuse.
    package var freePages = 0
    /// The memory map's current size.
    package var mapSize = 0
    /// Reader-table slots in use, and those among them left by exited processes.
    package var readerSlots = 0
    package var staleReaderSlots = 0
    /// Milliseconds since 1970 of the least and most recent access; nil when empty.
    package var oldestAccess: UInt64?
    package var newestAccess: UInt64?
    /// Entries past their expiry that trimming has not removed yet (those within a stale window
    /// included).
    package var expiredEntries = 0
    /// Records that fail their checks.
    package var damagedRecords = 0
    /// The record format version the store declares.
    package var formatVersion = 0
}
