import LMDBCacheStorage

// Reads: a key's record (a queued write first, then LMDB) and the committed totals.
extension DiskStore {
    /// What a lookup found.
    enum Lookup {
        case miss
        /// The value, when its record was written, when it expires (0 for never), the end of its
        /// stale window (0 for none), and the identity of its record (nil for a queued value whose
        /// record the writer builds).
        case hit(
            [UInt8], created: UInt64, expires: UInt64, staleUntil: UInt64, tags: EntryTags, record: RecordIdentity?)
        case damaged(Record.Damage)
    }

    /// The live entry for `key` at `now`: a queued write for it when there is one, else the
    /// committed record, read in a pooled read transaction. Records no access. With
    /// `includingStale`, an entry past its expiry but within its stale window is found too (the
    /// caller tells it by its expiry).
    ///
    /// - Throws: a queued record's damage (never expected: the caller encoded it), or LMDB's error.
    func lookUp(_ key: StorageKey, now: UInt64, includingStale: Bool = false) throws -> Lookup {
        if let pending = pending(key) {
            let record: [UInt8]
            switch pending {
            case .set(let built): record = built
            case .setDeflatingLater(let deferred):
                if includingStale ? deferred.isPastRemovalDeadline(at: now) : deferred.isExpired(at: now) {
                    return .miss
                }
                return .hit(
                    deferred.value, created: deferred.created, expires: deferred.expires,
                    staleUntil: deferred.staleUntil, tags: deferred.tags, record: nil)
            case .remove: return .miss
            }
            return try record.withUnsafeBytes { bytes -> Lookup in
                guard let found = try Record.read(bytes, key: key, now: now, includingStale: includingStale) else {
                    return .miss
                }
                return .hit(
                    found.value, created: found.header.created, expires: found.header.expires,
                    staleUntil: found.header.staleUntil, tags: Record.tags(bytes, header: found.header),
                    record: RecordIdentity(bytes)!)
            }
        }
        return try env.read { txn -> Lookup in
            guard let bytes = try txn.get(db.records, key.bytes) else { return .miss }
            let found: (header: Record.Header, value: [UInt8])?
            do throws(Record.Damage) {
                found = try Record.read(bytes, key: key, now: now, includingStale: includingStale)
            } catch {
                return .damaged(error)
            }
            guard let found else { return .miss }
            return .hit(
                found.value, created: found.header.created, expires: found.header.expires,
                staleUntil: found.header.staleUntil, tags: Record.tags(bytes, header: found.header),
                record: RecordIdentity(bytes)!)
        }
    }

    /// The write time and expiry (0 for never) of the live entry for `key` at `now`, queued or
    /// committed; nil when there is none or it has expired. The record is checked whole (shape,
    /// checksum, key) but its value is not decoded; a damaged committed one is reported (logged,
    /// then removed by the writer) and is a miss. Records no access.
    ///
    /// - Throws: a queued record's damage (never expected: the caller encoded it), or LMDB's error.
    func metadata(_ key: StorageKey, now: UInt64) throws -> (created: UInt64, expires: UInt64)? {
        /// The header of `bytes` when they hold a live entry of `key`.
        func live(_ bytes: UnsafeRawBufferPointer) throws(Record.Damage) -> Record.Header? {
            let header = try Record.validate(bytes, storedKey: key.bytes)
            guard Record.matches(bytes, header: header, key: key), !header.isExpired(at: now) else { return nil }
            return header
        }
        if let pending = pending(key) {
            switch pending {
            case .set(let record):
                return try record.withUnsafeBytes { try live($0) }.map { ($0.created, $0.expires) }
            case .setDeflatingLater(let deferred):
                return deferred.isExpired(at: now) ? nil : (deferred.created, deferred.expires)
            case .remove: return nil
            }
        }
        let found = try env.read { txn -> Result<Record.Header?, Record.Damage> in
            guard let bytes = try txn.get(db.records, key.bytes) else { return .success(nil) }
            return Result { () throws(Record.Damage) in try live(bytes) }
        }
        switch found {
        case .success(let header): return header.map { ($0.created, $0.expires) }
        case .failure(let damage):
            reportDamage(key, damage)
            return nil
        }
    }

    /// Records a read at `now` of the entry under `key`, whose record was written at `created`,
    /// when the use on record is old enough to matter (``RecentAccesses``): the entry's order then
    /// moves with the writer's next batch. `granularity` and `ageLimit` (milliseconds) are the
    /// reading handle's.
    func noteRead(_ key: StorageKey, created: UInt64, now: UInt64, granularity: UInt64, ageLimit: UInt64?) {
        // Other processes' commits and trims move the oldest entry too, and a process that only
        // reads commits nothing: a read looks again once a second.
        let refreshed = oldestAccessRefreshed.load(ordering: .relaxed)
        if now.subtractingSaturating(refreshed) >= 1_000 || now < refreshed {
            oldestAccessRefreshed.store(now, ordering: .relaxed)
            if let oldest = try? env.read({ try oldestAccessTime($0) }) {
                oldestAccess.store(oldest, ordering: .relaxed)
            }
        }
        let oldest = oldestAccess.load(ordering: .relaxed)
        let threshold = RecentAccesses.threshold(
            granularity: granularity, span: oldest == 0 ? 0 : now.subtractingSaturating(oldest), ageLimit: ageLimit)
        if recentAccesses.shouldRecord(key, created: created, now: now, threshold: threshold) {
            recordAccess(key, at: now, created: created)
        }
    }

    /// True when a live value is stored under `key` at `now`, queued or committed. Reads the
    /// header only: a damaged payload still counts.
    func contains(_ key: StorageKey, now: UInt64) throws -> Bool {
        if let pending = pending(key) {
            switch pending {
            case .set(let record):
                return record.withUnsafeBytes { Record.Header($0).map { !$0.isExpired(at: now) } ?? false }
            case .setDeflatingLater(let deferred): return !deferred.isExpired(at: now)
            case .remove: return false
            }
        }
        return try env.read { txn in
            guard let bytes = try txn.get(db.records, key.bytes),
                let header = Record.Header(bytes), header.belongs(toStoredKey: key.bytes)
            else { return false }
            return Record.matches(bytes, header: header, key: key) && !header.isExpired(at: now)
        }
    }

    /// Committed totals (other processes' commits included).
    func totals() throws -> Totals {
        try env.read { try Totals($0, db.info) }
    }
}
