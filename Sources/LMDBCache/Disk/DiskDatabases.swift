import LMDBCacheStorage

/// The LMDB databases of a disk store and the keys of its indexes.
///
/// - `records`: stored key → ``Record`` (immutable once written).
/// - `lastAccess`: stored key → 8-byte last-access time, only for entries read since their last
///   write; an entry's last access is this, else its record's `created`.
/// - `access`: 8-byte big-endian last-access time ‖ stored key → empty. Its first live entry is the
///   least recently used, so evicting k entries costs O(k log n). An entry is live when its time is
///   its entry's last access; overwrites and recorded uses leave the old one behind, stale, and
///   sweeps keep the stale ones about as many as the live ones (DiskStore+AccessIndex.swift).
/// - `expiry`: 8-byte big-endian removal time ‖ stored key → empty, for entries that expire. The
///   time is the record's ``Record/Header/removalDeadline``: the end of its stale window when it
///   has one, else its expiry.
/// - `tags`: the tag's 8-byte index prefix (``EntryTags/indexPrefix(_:)``) ‖ stored key → empty,
///   for entries with tags, so removing a tag's k entries costs O(k log n).
/// - `changes`: 8-byte big-endian sequence number → one ``CacheChange``: the change log that
///   memory tiers in other processes follow (DiskStore+ChangeLog.swift). Bounded.
/// - `info`: `count`, `bytes` (the totals, kept exact inside every write transaction) and
///   `format` (the record format version of the store: ``Record/formatVersion``, which builds that
///   read it can open; format 3 records, with a stale window, do not change it).
struct DiskDatabases {
    static let names = ["records", "lastAccess", "access", "expiry", "info", "tags", "changes"]

    let records: Database
    let lastAccess: Database
    let access: Database
    let expiry: Database
    let info: Database
    let tags: Database
    let changes: Database

    init(_ opened: [String: Database]) {
        records = opened["records"]!
        lastAccess = opened["lastAccess"]!
        access = opened["access"]!
        expiry = opened["expiry"]!
        info = opened["info"]!
        tags = opened["tags"]!
        changes = opened["changes"]!
    }

    /// When the entry under `key`, whose record says `created`, was last used.
    func lastAccess(_ txn: some TransactionReading, _ key: [UInt8], created: UInt64) throws -> UInt64 {
        try key.withUnsafeBytes { try lastAccess(txn, rawKey: $0, created: created) }
    }

    /// ``lastAccess(_:_:created:)`` of the stored key in `key`'s bytes.
    func lastAccess(_ txn: some TransactionReading, rawKey key: UnsafeRawBufferPointer, created: UInt64) throws
        -> UInt64
    {
        guard let stored = try txn.get(lastAccess, rawKey: key), stored.count == 8 else { return created }
        return stored.loadLE(UInt64.self, at: 0)
    }

    static func indexKey(time: UInt64, key: [UInt8]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 8)
        bytes.reserveCapacity(8 + key.count)
        for index in 0..<8 { bytes[index] = UInt8(truncatingIfNeeded: time >> UInt64(56 - 8 * index)) }
        bytes.append(contentsOf: key)
        return bytes
    }

    /// The tag index's key of `key` under the tag stored as `tag`.
    static func tagIndexKey(tag: [UInt8], key: [UInt8]) -> [UInt8] {
        EntryTags.indexPrefix(tag) + key
    }

    /// Splits an index key into its time and stored key.
    static func parseIndexKey(_ bytes: [UInt8]) -> (time: UInt64, key: [UInt8]) {
        bytes.withUnsafeBytes { bytes in
            let (time, key) = parseIndexKey(bytes)
            return (time, Array(key))
        }
    }

    /// The time and stored key of an index key in place: the stored key is a slice of `bytes`
    /// (empty for a damaged key of 8 bytes or fewer). Allocates nothing.
    static func parseIndexKey(_ bytes: UnsafeRawBufferPointer) -> (time: UInt64, key: UnsafeRawBufferPointer) {
        var time: UInt64 = 0
        for byte in bytes.prefix(8) { time = time << 8 | UInt64(byte) }
        guard bytes.count > 8 else { return (time, UnsafeRawBufferPointer(start: nil, count: 0)) }
        return (time, UnsafeRawBufferPointer(rebasing: bytes[8...]))
    }
}
