/// What a full check of a store found.
struct VerificationReport: Sendable {
    /// Totals from scanning every record.
    var scanned = Totals()
    /// Totals as kept in the `info` database.
    var recorded = Totals()
    var accessEntries = 0
    var expiryEntries = 0
    /// Stored keys whose record fails its checks, with the reason.
    var damaged: [(key: [UInt8], reason: String)] = []
    /// Index inconsistencies, one line each.
    var indexProblems: [String] = []

    var isClean: Bool {
        damaged.isEmpty && indexProblems.isEmpty && scanned == recorded
            && accessEntries == scanned.count
    }
}

extension DiskStore {
    /// Reads every record in one read transaction, checks each and checks the indexes and totals
    /// against them. O(n log n); for tests and `cache-dump verify`.
    func verify() throws -> VerificationReport {
        try env.read { txn in
            var report = VerificationReport()
            report.recorded = try Totals(txn, db.info)
            report.accessEntries = try txn.count(db.access)
            report.expiryEntries = try txn.count(db.expiry)
            var expiring = 0
            var records: [([UInt8], UInt64, UInt64)] = []
            try txn.forEach(db.records) { key, value in
                report.scanned.count += 1
                report.scanned.bytes += Totals.cost(keyLength: key.count, recordLength: value.count)
                do throws(Record.Damage) {
                    let header = try Record.validate(value)
                    if header.flags.contains(.compressed) { _ = try Record.value(value, header: header) }
                    records.append((Array(key), header.created, header.expires))
                    if header.expires != 0 { expiring += 1 }
                } catch {
                    report.damaged.append((Array(key), error.description))
                }
                return true
            }
            for (key, created, expires) in records {
                let accessed = try db.lastAccess(txn, key, created: created)
                if try txn.get(db.access, DiskDatabases.indexKey(time: accessed, key: key)) == nil {
                    report.indexProblems.append("access index has no entry for a record")
                }
                if expires != 0, try txn.get(db.expiry, DiskDatabases.indexKey(time: expires, key: key)) == nil {
                    report.indexProblems.append("expiry index has no entry for an expiring record")
                }
            }
            if report.accessEntries != report.scanned.count {
                report.indexProblems.append(
                    "access index holds \(report.accessEntries) entries for \(report.scanned.count) records")
            }
            if report.expiryEntries != expiring {
                report.indexProblems.append(
                    "expiry index holds \(report.expiryEntries) entries for \(expiring) expiring records")
            }
            return report
        }
    }
}
