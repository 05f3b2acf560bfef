/// What a full check of a store found.
package struct VerificationReport: Sendable {
    /// Totals from scanning every record.
    package var scanned = Totals()
    /// Totals as kept in the `info` database.
    package var recorded = Totals()
    package var accessEntries = 0
    /// Access index entries that are no record's current one: left behind by overwrites and
    /// recorded uses, swept later (DiskStore+AccessIndex.swift). Not a problem.
    package var staleAccessEntries = 0
    package var expiryEntries = 0
    /// Entries of the tag index (tag prefix ‖ stored key).
    package var tagEntries = 0
    /// Tag index entries that sound tagged records lack.
    package var missingTagEntries = 0
    /// Tag index entries that name no sound record carrying a tag with their prefix.
    package var orphanedTagEntries = 0
    /// Entries of the change log, and its head (the `changeHead` info value).
    package var changeEntries = 0
    package var changeHead: UInt64 = 0
    /// Change log entries whose key is not 8 bytes, whose value is not a change, or whose
    /// sequence number is past the head.
    package var malformedChangeKeys = 0
    package var undecodableChanges = 0
    package var changesPastHead = 0
    /// True when the `changeHead` info value is there but not 8 bytes.
    package var malformedChangeHead = false
    /// Stored keys whose record fails its checks, with the reason.
    package var damaged: [(key: [UInt8], reason: String)] = []
    /// Index inconsistencies, one line each.
    package var indexProblems: [String] = []

    /// Change log problems: its entries that are wrong in any way, and its head if malformed.
    package var badChanges: Int {
        malformedChangeKeys + undecodableChanges + changesPastHead + (malformedChangeHead ? 1 : 0)
    }

    /// True when nothing is wrong.
    package var isClean: Bool {
        damaged.isEmpty && indexProblems.isEmpty && scanned == recorded
            && accessEntries >= scanned.count && missingTagEntries == 0 && orphanedTagEntries == 0
            && badChanges == 0
    }

    /// Every problem, one line each: damaged records, index problems, totals that differ.
    package var problems: [String] {
        var lines = damaged.map { "damaged record \(escapedKey($0.key)): \($0.reason)" }
        lines += indexProblems
        if missingTagEntries > 0 {
            lines.append("tag index lacks \(Self.entries(missingTagEntries)) of tagged records")
        }
        if orphanedTagEntries > 0 {
            lines.append(
                "tag index: \(Self.entries(orphanedTagEntries, "names", "name")) no record carrying a tag of "
                    + "\(orphanedTagEntries == 1 ? "its" : "their") prefix")
        }
        if malformedChangeKeys > 0 {
            lines.append("change log: \(Self.entries(malformedChangeKeys, "has", "have")) no 8-byte sequence number")
        }
        if undecodableChanges > 0 {
            lines.append("change log: \(Self.entries(undecodableChanges, "does", "do")) not decode as a change")
        }
        if malformedChangeHead {
            lines.append("change log: its head (the info value changeHead) is not 8 bytes")
        }
        if changesPastHead > 0 {
            lines.append("change log: \(Self.entries(changesPastHead, "is", "are")) past its head (\(changeHead))")
        }
        if scanned.count != recorded.count {
            lines.append("totals say \(recorded.count) entries; the records number \(scanned.count)")
        }
        if scanned.bytes != recorded.bytes {
            lines.append("totals say \(recorded.bytes) bytes; the records occupy \(scanned.bytes)")
        }
        return lines
    }

    /// `1 entry has`, `2 entries have`: the count, the noun and a verb that agree with it.
    private static func entries(_ count: Int, _ singular: String = "", _ plural: String = "") -> String {
        let words = count == 1 ? "\(count) entry \(singular)" : "\(count) entries \(plural)"
        return singular.isEmpty ? String(words.dropLast()) : words
    }
}

/// What ``DiskStore/repair()`` changed.
package struct RepairReport: Sendable, Equatable {
    /// Damaged records removed.
    package var removedRecords = 0
    /// Entries of the `lastAccess` database dropped because their record was gone.
    package var removedAccessTimes = 0
    /// Index entries written by the rebuild.
    package var accessEntries = 0
    package var expiryEntries = 0
    /// Tag index entries dropped (they named no sound record carrying their tag) and added (a
    /// tagged record lacked them).
    package var droppedTagEntries = 0
    package var addedTagEntries = 0
    /// Change log entries dropped because some were bad (the log is then emptied, its head kept).
    package var droppedChanges = 0
    /// Totals before and after.
    package var totalsBefore = Totals()
    package var totalsAfter = Totals()
}

/// A key for a one-line message: printable ASCII as is, other bytes as `\xNN`.
package func escapedKey(_ key: [UInt8]) -> String {
    var text = ""
    for byte in key {
        if byte >= 0x20 && byte < 0x7f && byte != UInt8(ascii: "\\") {
            text.unicodeScalars.append(Unicode.Scalar(byte))
        } else {
            text += "\\x" + String(byte, radix: 16, uppercase: false).leftPadded(to: 2)
        }
    }
    return text
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension DiskStore {
    /// Reads every record in one read transaction, checks each and checks the indexes and totals
    /// against them, telling `progress` the records checked every 4,096. O(n log n); for tests
    /// and `cache-dump verify`.
    func verify(progress: ((Int) -> Void)? = nil) throws -> VerificationReport {
        try env.read { txn in
            var report = VerificationReport()
            report.recorded = try Totals(txn, db.info)
            report.accessEntries = try txn.count(db.access)
            report.expiryEntries = try txn.count(db.expiry)
            var expiring = 0
            // Stored key, write time, removal deadline.
            var records: [([UInt8], UInt64, UInt64)] = []
            // Stored key → the index prefixes of its tags, for sound tagged records.
            var tagged: [[UInt8]: Set<[UInt8]>] = [:]
            try txn.forEach(db.records) { key, value in
                report.scanned.count += 1
                if report.scanned.count % 4_096 == 0 { progress?(report.scanned.count) }
                report.scanned.bytes += Totals.cost(keyLength: key.count, recordLength: value.count)
                do throws(Record.Damage) {
                    let header = try Record.validate(value, storedKey: Array(key))
                    if header.flags.contains(.compressed) { _ = try Record.value(value, header: header) }
                    // The expiry index keys a record by when trimming removes it.
                    records.append((Array(key), header.created, header.removalDeadline))
                    if header.tagsLength > 0 { tagged[Array(key)] = Self.tagIndexPrefixes(value, header: header) }
                    if header.removalDeadline != 0 { expiring += 1 }
                } catch {
                    report.damaged.append((Array(key), error.description))
                }
                return true
            }
            var liveAccessEntries = 0
            for (key, created, deadline) in records {
                let accessed = try db.lastAccess(txn, key, created: created)
                if try txn.get(db.access, DiskDatabases.indexKey(time: accessed, key: key)) == nil {
                    report.indexProblems.append("access index has no entry for \(escapedKey(key))")
                } else {
                    liveAccessEntries += 1
                }
                if deadline != 0, try txn.get(db.expiry, DiskDatabases.indexKey(time: deadline, key: key)) == nil {
                    report.indexProblems.append("expiry index has no entry for \(escapedKey(key))")
                }
            }
            var orphans = 0
            try txn.forEach(db.lastAccess) { key, _ in
                if try txn.get(db.records, Array(key)) == nil { orphans += 1 }
                return true
            }
            if orphans > 0 {
                report.indexProblems.append("\(orphans) access times belong to no record")
            }
            // Damaged records are not scanned: their entries count as stale here.
            report.staleAccessEntries = report.accessEntries - liveAccessEntries
            if report.expiryEntries != expiring {
                report.indexProblems.append(
                    "expiry index holds \(report.expiryEntries) entries for \(expiring) expiring records")
            }
            let tags = try checkTagIndex(txn, tagged: tagged)
            report.tagEntries = tags.entries
            report.missingTagEntries = tags.missing
            report.orphanedTagEntries = tags.orphaned
            let changes = try checkChangeLog(txn)
            report.changeEntries = changes.entries
            report.changeHead = changes.head
            report.malformedChangeKeys = changes.malformedKeys
            report.undecodableChanges = changes.undecodable
            report.changesPastHead = changes.pastHead
            report.malformedChangeHead = changes.malformedHead
            return report
        }
    }

    /// Records written per transaction by ``repair()``.
    static let repairBatchSize = 4_096

    /// Commits the queue, removes every damaged record, then rebuilds the access and expiry
    /// indexes, the access times and the totals from the records, in transactions of
    /// ``repairBatchSize`` records; then makes the tag index what the records say (orphans
    /// dropped, missing entries added: ``rebuildTagIndex()``), and when the change log holds a
    /// bad entry, empties it, keeping its head (followers then drop their memory tiers). Needs
    /// the store to itself: between those transactions the indexes are incomplete.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has it open.
    func repair() throws -> RepairReport {
        try env.writer.sync {
            drain()
            let report: RepairReport? = try presence.alone { try rebuild() }
            guard let report else { throw CacheError.storeInUse(path: path, operation: "repair") }
            try env.sync()
            return report
        }
    }

    /// The body of ``repair()``; writer only, with no other process on the store.
    private func rebuild() throws -> RepairReport {
        var report = RepairReport()
        report.totalsBefore = try totals()
        let found = try verify()
        let damaged = found.damaged.map(\.key)
        for start in stride(from: 0, to: damaged.count, by: Self.repairBatchSize) {
            try env.write { txn in
                for key in damaged[start..<min(start + Self.repairBatchSize, damaged.count)] {
                    try txn.delete(db.records, key)
                    try txn.delete(db.lastAccess, key)
                }
            }
        }
        report.removedRecords = damaged.count
        let orphans = try env.read { txn in
            var orphans: [[UInt8]] = []
            try txn.forEach(db.lastAccess) { key, _ in
                if try txn.get(db.records, Array(key)) == nil { orphans.append(Array(key)) }
                return true
            }
            return orphans
        }
        try env.write { txn in
            for key in orphans { try txn.delete(db.lastAccess, key) }
            try txn.empty(db.access)
            try txn.empty(db.expiry)
        }
        report.removedAccessTimes = orphans.count
        var totals = Totals()
        var after: [UInt8]?
        while true {
            let batch = try env.write { txn in
                var written = 0
                var last: [UInt8]?
                var batchTotals = Totals()
                var accessEntries = 0
                var expiryEntries = 0
                // Collect first: the indexes change while the records are read.
                var entries: [(key: [UInt8], accessed: UInt64, deadline: UInt64, cost: Int)] = []
                try txn.forEach(db.records, from: after) { key, bytes in
                    let stored = Array(key)
                    if let after, stored == after { return true }
                    guard let header = Record.Header(bytes) else { return true }
                    let accessed = try db.lastAccess(txn, stored, created: header.created)
                    entries.append(
                        (
                            stored, accessed, header.removalDeadline,
                            Totals.cost(keyLength: key.count, recordLength: bytes.count)
                        )
                    )
                    last = stored
                    written += 1
                    return written < Self.repairBatchSize
                }
                for entry in entries {
                    try txn.put(db.access, DiskDatabases.indexKey(time: entry.accessed, key: entry.key), [])
                    accessEntries += 1
                    // By when trimming removes the record: the end of its stale window, if any.
                    if entry.deadline != 0 {
                        try txn.put(db.expiry, DiskDatabases.indexKey(time: entry.deadline, key: entry.key), [])
                        expiryEntries += 1
                    }
                    batchTotals.count += 1
                    batchTotals.bytes += entry.cost
                }
                if last == nil { try totals.save(txn, db.info) }
                return (last, batchTotals, accessEntries, expiryEntries)
            }
            // Counted after the commit: a transaction replayed after map growth runs its body again.
            totals.count += batch.1.count
            totals.bytes += batch.1.bytes
            report.accessEntries += batch.2
            report.expiryEntries += batch.3
            guard let last = batch.0 else { break }
            after = last
        }
        report.totalsAfter = totals
        (report.droppedTagEntries, report.addedTagEntries) = try rebuildTagIndex()
        if found.badChanges > 0 { report.droppedChanges = try emptyChangeLog() }
        return report
    }
}
