import Foundation

import LMDBCacheStorage

@testable import LMDBCache

/// The disk tier's tag index read raw and compared with the records, apart from the code under
/// test: every index entry must point at a live record that carries a tag with that prefix, and
/// every tagged record must have an index entry per tag.
enum TagIndexAudit {
    /// One entry of the `tags` database: the tag's 8-byte prefix and the stored key.
    struct IndexEntry: Hashable, CustomStringConvertible {
        var prefix: [UInt8]
        var key: [UInt8]

        var description: String {
            "\(prefix.map { String($0, radix: 16) }.joined())‖\(String(decoding: key.prefix(24), as: UTF8.self))"
        }
    }

    /// Every entry of the `tags` database, in key order (committed only).
    static func rawEntries(_ disk: DiskCache) throws -> [IndexEntry] {
        try disk.withStore { store in try store.env.read { txn in try rawEntries(store, txn) } }
    }

    static func rawEntries(_ store: DiskStore, _ txn: some TransactionReading) throws -> [IndexEntry] {
        var entries: [IndexEntry] = []
        try txn.forEach(store.db.tags) { key, _ in
            let bytes = Array(key)
            entries.append(IndexEntry(prefix: Array(bytes.prefix(8)), key: Array(bytes.dropFirst(8))))
            return true
        }
        return entries
    }

    /// The index entries the committed records call for: one per tag of each tagged record.
    static func expectedEntries(_ store: DiskStore, _ txn: some TransactionReading) throws -> Set<IndexEntry> {
        var expected: Set<IndexEntry> = []
        try txn.forEach(store.db.records) { key, bytes in
            let stored = Array(key)
            guard let header = try? Record.validate(bytes, storedKey: stored) else { return true }
            for tag in Record.tags(bytes, header: header).bytes {
                expected.insert(IndexEntry(prefix: EntryTags.indexPrefix(tag), key: stored))
            }
            return true
        }
        return expected
    }

    /// One line per disagreement between the index and the records, read in one transaction
    /// (the writer may commit meanwhile); empty when they agree.
    static func problems(_ disk: DiskCache) throws -> [String] {
        let (raw, expected) = try disk.withStore { store in
            try store.env.read { txn in (try rawEntries(store, txn), try expectedEntries(store, txn)) }
        }
        var problems: [String] = []
        let rawSet = Set(raw)
        if rawSet.count != raw.count { problems.append("the index holds duplicate entries") }
        for entry in raw where !expected.contains(entry) {
            problems.append("index entry \(entry) has no live record carrying a tag with that prefix")
        }
        for entry in expected where !rawSet.contains(entry) {
            problems.append("record \(entry) carries a tag the index lacks")
        }
        return problems
    }

    /// The stored keys of the committed, valid records carrying `tag`, found by scanning every
    /// record (not through the index).
    static func scannedKeys(_ disk: DiskCache, taggedWith tag: String) throws -> Set<[UInt8]> {
        let bytes = try EntryTags.storedBytes(of: tag)
        return try disk.withStore { store in
            try store.env.read { txn in
                var keys: Set<[UInt8]> = []
                try txn.forEach(store.db.records) { key, record in
                    let stored = Array(key)
                    if let header = try? Record.validate(record, storedKey: stored),
                        Record.carries(record, header: header, tag: bytes)
                    {
                        keys.insert(stored)
                    }
                    return true
                }
                return keys
            }
        }
    }

    /// Puts `entry` in the index by hand, in a write transaction on the store's writer.
    static func forge(_ disk: DiskCache, _ entry: IndexEntry) throws {
        try disk.withStore { store in
            try store.env.writer.sync {
                try store.env.write { txn in try txn.put(store.db.tags, entry.prefix + entry.key, []) }
            }
        }
    }

    /// Puts `bytes` under `key` in the records database by hand (no index entries, totals
    /// untouched): a damaged record.
    static func forgeRecord(_ disk: DiskCache, key: [UInt8], bytes: [UInt8]) throws {
        try disk.withStore { store in
            try store.env.writer.sync {
                try store.env.write { txn in try txn.put(store.db.records, key, bytes) }
            }
        }
    }
}
