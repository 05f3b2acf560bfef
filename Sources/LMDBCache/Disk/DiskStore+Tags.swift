// Removal by tag: the tag index (tag prefix ‖ stored key) names a tag's entries, so removing k
// of them costs O(k log n), in transactions as small as a trim's with the totals exact in each.
extension DiskStore {
    /// Most removals per transaction of a removal by tag: four times a trim's, as each commit
    /// syncs the file (`.batched` durability) and the writer is held throughout anyway; small
    /// enough that another process's writer waits a few milliseconds at most.
    static let tagRemovalBatchSize = 1_024

    /// Removes every entry carrying the tag stored as `tag` (``EntryTags/storedBytes(of:)``),
    /// queued writes committed first, in transactions of at most ``tagRemovalBatchSize`` removals, each
    /// logging the removal as `origin`'s (so a follower that applied the last one holds nothing
    /// removed). Holds the writer throughout: this process's writes queued meanwhile commit
    /// after it. The observers hear of each entry removed (reason `.explicit`).
    ///
    /// An index entry whose record is gone, damaged or without the tag (another tag with the
    /// same 8-byte prefix) is left to the record, or dropped when it has none; so a prefix
    /// collision costs a look, never a wrong removal. Returns the entries removed.
    @discardableResult
    func removeAll(taggedWith tag: [UInt8], origin: UInt64 = 0) throws -> Int {
        let prefix = EntryTags.indexPrefix(tag)
        let observed = isObserved
        return try env.writer.sync {
            drain()
            var removedTotal = 0
            var start = prefix
            while true {
                var removed: [DiskEviction] = []
                let (next, count) = try env.write { txn -> ([UInt8]?, Int) in
                    removed.removeAll()  // a replayed transaction starts over
                    var totals = try Totals(txn, db.info)
                    let before = totals
                    var indexKeys: [[UInt8]] = []
                    var next: [UInt8]?
                    try txn.forEach(db.tags, from: start) { key, _ in
                        guard key.starts(with: prefix) else { return false }
                        guard indexKeys.count < Self.tagRemovalBatchSize else {
                            next = Array(key)
                            return false
                        }
                        indexKeys.append(Array(key))
                        return true
                    }
                    for indexKey in indexKeys {
                        let key = Array(indexKey.dropFirst(prefix.count))
                        guard let bytes = try txn.get(db.records, key) else {
                            try txn.delete(db.tags, indexKey)
                            continue
                        }
                        guard let header = try? Record.validate(bytes, storedKey: key) else {
                            // Damaged: the index entry goes; the record is a reader's to report.
                            try txn.delete(db.tags, indexKey)
                            continue
                        }
                        guard Record.carries(bytes, header: header, tag: tag) else { continue }
                        let fullKey = Record.fullKey(bytes, header: header) ?? key
                        let bytesBefore = totals.bytes
                        try removeEntry(key, txn, &totals)
                        if observed {
                            removed.append(
                                DiskEviction(key: fullKey, reason: .explicit, bytes: bytesBefore - totals.bytes))
                        }
                    }
                    if totals != before { try totals.save(txn, db.info) }
                    try appendChanges([CacheChange(kind: .tag, origin: origin, subject: tag)], txn)
                    return (next, before.count - totals.count)
                }
                removedTotal += count
                publish(removed)
                guard let next else { return removedTotal }
                start = next
            }
        }
    }

    /// The stored keys of the entries the tag index files under the tag stored as `tag` whose
    /// records carry it, committed (for `cache-dump list --tag` and tests).
    func keys(taggedWith tag: [UInt8]) throws -> [[UInt8]] {
        let prefix = EntryTags.indexPrefix(tag)
        return try env.read { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(db.tags, from: prefix) { indexKey, _ in
                guard indexKey.starts(with: prefix) else { return false }
                let key = Array(indexKey.dropFirst(prefix.count))
                if let bytes = try txn.get(db.records, key), let header = try? Record.validate(bytes, storedKey: key),
                    Record.carries(bytes, header: header, tag: tag)
                {
                    keys.append(key)
                }
                return true
            }
            return keys
        }
    }
}
