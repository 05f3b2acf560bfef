import LMDBCacheStorage

// Checking and rebuilding the tag index and checking the change log, for `cache-dump verify`
// (DiskStore+Verification.swift). Everything read here comes from the file: an index key too
// short to hold a prefix, a record that fails its checks, a log entry that does not decode are
// counted, never trusted.
extension DiskStore {
    /// What a check of the tag index against the records found.
    struct TagIndexCheck {
        /// Entries of the `tags` database.
        var entries = 0
        /// Index entries a sound tagged record should have and has not.
        var missing = 0
        /// Index entries that name no sound record carrying a tag with their prefix (the record is
        /// gone, damaged, without such a tag, or the index key is too short to name one).
        var orphaned = 0
    }

    /// The distinct tag index prefixes (``EntryTags/indexPrefix(_:)``) of the tags the record
    /// `bytes` carries; `header` must come from ``Record/validate(_:storedKey:)``. Two tags may
    /// share a prefix, and then one index entry serves both.
    static func tagIndexPrefixes(_ bytes: UnsafeRawBufferPointer, header: Record.Header) -> Set<[UInt8]> {
        Set(Record.tags(bytes, header: header).bytes.map(EntryTags.indexPrefix))
    }

    /// Checks the tag index both ways in `txn`: each entry names a sound record carrying a tag
    /// with its prefix, and each sound record of `tagged` (stored key → its tags' prefixes, as
    /// ``tagIndexPrefixes(_:header:)`` gives them) has an entry per prefix. O(t log n) for t
    /// index entries and tags.
    func checkTagIndex(_ txn: some TransactionReading, tagged: [[UInt8]: Set<[UInt8]>]) throws -> TagIndexCheck {
        var check = TagIndexCheck()
        check.entries = try txn.count(db.tags)
        for (key, prefixes) in tagged {
            for prefix in prefixes {
                if try txn.get(db.tags, prefix + key) == nil { check.missing += 1 }
            }
        }
        try txn.forEach(db.tags) { indexKey, _ in
            let prefixLength = EntryTags.indexPrefixLength
            if indexKey.count <= prefixLength {
                check.orphaned += 1
            } else {
                let key = Array(indexKey.dropFirst(prefixLength))
                let prefix = Array(indexKey.prefix(prefixLength))
                if tagged[key]?.contains(prefix) != true { check.orphaned += 1 }
            }
            return true
        }
        return check
    }

    /// True when the tag index entry `indexKey` names a sound record in `txn` that carries a tag
    /// with its prefix.
    private func tagIndexEntryIsSound(_ indexKey: [UInt8], _ txn: some TransactionReading) throws -> Bool {
        let prefixLength = EntryTags.indexPrefixLength
        guard indexKey.count > prefixLength else { return false }
        let key = Array(indexKey.dropFirst(prefixLength))
        guard let bytes = try txn.get(db.records, key), let header = try? Record.validate(bytes, storedKey: key)
        else { return false }
        return Self.tagIndexPrefixes(bytes, header: header).contains(Array(indexKey.prefix(prefixLength)))
    }

    /// Makes the tag index exactly what the records say, in write transactions of at most
    /// ``repairBatchSize`` index entries or records each: drops every entry that names no sound
    /// record carrying a tag with its prefix, then adds the entries sound tagged records lack.
    /// Changes neither the records nor the totals (the index is not counted in them). Writer
    /// only, with the store to itself (``repair()``). Returns the entries dropped and added.
    func rebuildTagIndex() throws -> (dropped: Int, added: Int) {
        var dropped = 0
        var after: [UInt8]?
        while true {
            // Collected first, deleted after the walk: the cursor does not walk a changing tree.
            let (last, orphans) = try env.write { txn -> ([UInt8]?, Int) in
                var examined = 0
                var last: [UInt8]?
                var orphans: [[UInt8]] = []
                try txn.forEach(db.tags, from: after) { indexKey, _ in
                    let current = Array(indexKey)
                    if let after, current == after { return true }
                    if try !tagIndexEntryIsSound(current, txn) { orphans.append(current) }
                    last = current
                    examined += 1
                    return examined < Self.repairBatchSize
                }
                for orphan in orphans { try txn.delete(db.tags, orphan) }
                return (last, orphans.count)
            }
            // Counted after the commit: a transaction replayed after map growth runs its body again.
            dropped += orphans
            guard let last else { break }
            after = last
        }
        var added = 0
        after = nil
        while true {
            let (last, missing) = try env.write { txn -> ([UInt8]?, Int) in
                var examined = 0
                var last: [UInt8]?
                var wanted: [[UInt8]] = []
                try txn.forEach(db.records, from: after) { key, bytes in
                    let stored = Array(key)
                    if let after, stored == after { return true }
                    if let header = try? Record.validate(bytes, storedKey: stored) {
                        for prefix in Self.tagIndexPrefixes(bytes, header: header) { wanted.append(prefix + stored) }
                    }
                    last = stored
                    examined += 1
                    return examined < Self.repairBatchSize
                }
                var missing = 0
                for indexKey in wanted {
                    if try txn.putIfAbsent(db.tags, indexKey, UnsafeRawBufferPointer(start: nil, count: 0)) {
                        missing += 1
                    }
                }
                return (last, missing)
            }
            added += missing
            guard let last else { break }
            after = last
        }
        return (dropped, added)
    }

    /// What a check of the change log found.
    struct ChangeLogCheck {
        /// Entries of the `changes` database.
        var entries = 0
        /// The `changeHead` info value (0 when there is none, or it is malformed).
        var head: UInt64 = 0
        /// True when the `changeHead` info value is there but not 8 bytes.
        var malformedHead = false
        /// The greatest sequence number of the log's 8-byte keys (0 for none).
        var newest: UInt64 = 0
        /// Entries whose key is not an 8-byte sequence number.
        var malformedKeys = 0
        /// Entries whose value is not a ``CacheChange`` (``CacheChange/init(encoded:)`` says nil).
        var undecodable = 0
        /// Entries numbered after the head: no commit wrote them.
        var pastHead = 0

        /// Entries that are wrong in any of those ways, and the head if it is malformed.
        var bad: Int { malformedKeys + undecodable + pastHead + (malformedHead ? 1 : 0) }
    }

    /// Checks every entry of the change log in `txn`: an 8-byte key, a sequence number no later
    /// than the head, a value that decodes. O(c) for c entries (at most ``changeLogCapacity``
    /// in a sound store).
    func checkChangeLog(_ txn: some TransactionReading) throws -> ChangeLogCheck {
        var check = ChangeLogCheck()
        check.head = try Totals.load(txn, db.info, Self.changeHeadKey)
        check.malformedHead = try txn.get(db.info, Self.changeHeadKey).map { $0.count != 8 } ?? false
        check.entries = try txn.count(db.changes)
        try txn.forEach(db.changes) { key, value in
            if let sequence = Self.changeSequence(key) {
                check.newest = max(check.newest, sequence)
                // Against a malformed head (read as 0) no entry is judged: the head is the problem.
                if sequence > check.head && !check.malformedHead {
                    check.pastHead += 1
                } else if CacheChange(encoded: value) == nil {
                    check.undecodable += 1
                }
            } else {
                check.malformedKeys += 1
            }
            return true
        }
        return check
    }

    /// Drops every entry of the change log, keeping its head: a follower behind the head then
    /// finds its next change gone and drops its memory tier, as when it falls behind; new changes
    /// go on from the head. A malformed head is written again as the newest sequence number the
    /// log held (a follower past it falls behind the same way). Writer only. Returns the entries
    /// dropped.
    func emptyChangeLog() throws -> Int {
        try env.write { txn in
            let check = try checkChangeLog(txn)
            try txn.empty(db.changes)
            if check.malformedHead { try Totals.store(txn, db.info, Self.changeHeadKey, check.newest) }
            return check.entries
        }
    }
}

extension EntryTags {
    /// Bytes of ``indexPrefix(_:)``: the start of every key of the disk tier's tag index.
    static let indexPrefixLength = 8
}
