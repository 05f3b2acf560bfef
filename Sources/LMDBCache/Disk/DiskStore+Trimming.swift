import LMDBCacheStorage

// Trimming: expired entries first, then least recently used ones through the access index, in
// transactions small enough that the writer never waits long.
extension DiskStore {
    /// What a trim removes, beyond expired entries: least recently used entries while the store
    /// holds more than `count` entries or `cost` bytes, and entries last used before `accessedBefore`.
    struct TrimPlan {
        var count: Int?
        var cost: Int?
        var accessedBefore: UInt64?
        /// The reason reported for least-recently-used evictions, when not the limit's own.
        var reason: RemovalReason?
        /// Most removals per transaction (default ``DiskStore/trimBatchSize``).
        var batchSize = DiskStore.trimBatchSize
    }

    /// Removes expired entries, then least recently used ones as `plan` says, in transactions of
    /// at most ``trimBatchSize`` removals; queued writes are committed between them, and when they
    /// pass their limits, those are enforced once the plan is met. Writer only.
    /// Returns the entries removed.
    @discardableResult
    func trim(_ plan: TrimPlan, now: UInt64, committingQueuedWrites: Bool = true) throws -> Int {
        let observed = isObserved
        var removedTotal = 0
        var plan = plan
        var passedLimits: DiskLimits?
        // The free-space limit of writes committed meanwhile, and the bytes they added under it.
        var freeSpaceLimits: DiskLimits?
        var addedUnderFreeSpaceLimit = 0
        while true {
            var evicted: [DiskEviction] = []
            var tally = EvictionTally()
            let done = try env.write { txn in
                evicted.removeAll()  // a replayed transaction starts over
                tally = EvictionTally()
                var totals = try Totals(txn, db.info)
                let before = totals
                let done = try evict(plan, now: now, txn, &totals) { eviction in
                    tally.add(eviction)
                    if observed { evicted.append(eviction) }
                }
                if totals != before { try totals.save(txn, db.info) }
                return (done, before.count - totals.count, try oldestAccessTime(txn))
            }
            // Set only once committed: a replayed transaction's body may run twice.
            oldestAccess.store(done.2, ordering: .relaxed)
            removedTotal += done.1
            tally.report(to: evictionMetrics)
            publish(evicted)
            if done.0 {
                // Writes committed between this trim's transactions passed their limits: trim
                // again for them (committing more writes between its transactions, if queued),
                // count and cost first, then free space. Each follow-up is armed by new commits only.
                if let limits = passedLimits {
                    passedLimits = nil
                    if let followUp = try followUpPlan(limits) {
                        plan = followUp
                        continue
                    }
                }
                if let limits = freeSpaceLimits {
                    freeSpaceLimits = nil
                    let added = addedUnderFreeSpaceLimit
                    addedUnderFreeSpaceLimit = 0
                    if let followUp = try freeSpaceFollowUpPlan(limits, added: added) {
                        plan = followUp
                        continue
                    }
                }
                return removedTotal
            }
            if committingQueuedWrites,
                case .limitsPassed(let limits, let exceeded, let added) = commitNextBatch(enforcingLimits: false)
            {
                if exceeded { passedLimits = limits }
                if added > 0 {
                    freeSpaceLimits = limits
                    addedUnderFreeSpaceLimit += added
                }
            }
        }
    }

    /// The trim that brings the store back inside `limits` after writes committed during another
    /// trim passed them: count and cost down to their low-water mark. Nil when the limits hold.
    private func followUpPlan(_ limits: DiskLimits) throws -> TrimPlan? {
        guard limits.isExceeded(by: try totals()) else { return nil }
        let targets = limits.lowWaterTargets
        return TrimPlan(count: targets.count, cost: targets.cost)
    }

    /// The trim owed, with the volume short of the free-space limit of `limits`, for writes that
    /// `added` bytes during another trim: as many bytes as they added, as ``keepFreeSpace`` does
    /// after any batch (the file does not shrink, so trimming by the volume's shortfall would
    /// only empty the store). Nil when the volume has the space.
    private func freeSpaceFollowUpPlan(_ limits: DiskLimits, added: Int) throws -> TrimPlan? {
        guard added > 0, let limit = limits.freeSpace, let free = VolumeSpace.available(at: directory.resolved),
            free < limit
        else {
            return nil
        }
        return TrimPlan(cost: max(0, try totals().bytes - added), reason: .freeSpace)
    }

    /// One transaction's share of a trim; true when the plan is met.
    /// Entries `evict` removes are passed to `evicted` with the reason.
    private func evict(
        _ plan: TrimPlan, now: UInt64, _ txn: WriteTransaction, _ totals: inout Totals,
        _ evicted: (DiskEviction) -> Void
    ) throws -> Bool {
        var removed = 0
        var dropped = 0
        while let first = try txn.firstKey(db.expiry) {
            let (time, key) = DiskDatabases.parseIndexKey(first)
            guard time <= now else { break }
            guard removed < plan.batchSize else { return false }
            try evictThroughIndex(first, time: time, key: key, index: db.expiry, txn, &totals) { fullKey, bytes in
                evicted(DiskEviction(key: fullKey, reason: .expired, bytes: bytes))
            }
            removed += 1
        }
        while let first = try txn.firstKey(db.access) {
            let (time, key) = DiskDatabases.parseIndexKey(first)
            let reason: RemovalReason
            if let count = plan.count, totals.count > count {
                reason = .count
            } else if let cost = plan.cost, totals.bytes > cost {
                reason = .cost
            } else if let cutoff = plan.accessedBefore, time < cutoff {
                reason = .age
            } else {
                return true
            }
            // Stale entries (DiskStore+AccessIndex.swift) dropped on the way have a budget of
            // their own: a transaction of the batch size still evicts.
            guard removed < plan.batchSize, dropped < Self.staleDropsPerEviction * plan.batchSize else { return false }
            let wasLive = try evictThroughIndex(first, time: time, key: key, index: db.access, txn, &totals) {
                fullKey, bytes in
                evicted(DiskEviction(key: fullKey, reason: plan.reason ?? reason, bytes: bytes))
            }
            if wasLive { removed += 1 } else { dropped += 1 }
        }
        return true
    }

    /// Stale access entries a trim transaction may drop for each entry it may evict.
    static let staleDropsPerEviction = 8

    /// Removes the entry an index entry points to; an index entry that no longer matches its
    /// record (a stale access entry, or one left by a damaged record) is dropped on its own, so
    /// trimming always progresses. `removed` gets the full key and the bytes of an entry the index
    /// entry pointed to and that was removed. Returns whether the index entry matched its record.
    @discardableResult
    private func evictThroughIndex(
        _ indexKey: [UInt8], time: UInt64, key: [UInt8], index: Database, _ txn: WriteTransaction,
        _ totals: inout Totals, removed: ([UInt8], Int) -> Void
    ) throws -> Bool {
        var matches = false
        // A damaged index key of 8 bytes or fewer names no stored key (LMDB refuses an empty one).
        if !key.isEmpty, let bytes = try txn.get(db.records, key) {
            var fullKey: [UInt8]?  // nil for a damaged record: not reported as an eviction
            if let header = Record.Header(bytes) {
                matches =
                    index == db.access
                    ? try db.lastAccess(txn, key, created: header.created) == time : header.removalDeadline == time
                fullKey = Record.fullKey(bytes, header: header) ?? key
            } else {
                matches = true
            }
            if matches {
                let bytesBefore = totals.bytes
                try removeEntry(key, txn, &totals)
                if let fullKey { removed(fullKey, bytesBefore - totals.bytes) }
            }
        }
        try txn.delete(index, indexKey)
        return matches
    }

    /// Commits the queue, then trims as `plan` says at `now` (on the writer); returns the
    /// entries removed.
    @discardableResult
    func commitQueueAndTrim(_ plan: TrimPlan, now: UInt64) throws -> Int {
        try env.writer.sync {
            drain()
            return try trim(plan, now: now)
        }
    }

    /// One pass of the trimming scheduler: clears stale reader slots, then removes expired
    /// entries, entries idle past `ageLimit`, and, where `limits` are passed, least recently used
    /// entries down to their low-water mark. Returns the entries removed.
    func trimPass(limits: DiskLimits, ageLimit: Duration?) throws -> Int {
        env.clearStaleReaders(before: "a trim pass")
        let now = limits.clock.milliseconds
        let totals = try totals()
        let targets = limits.lowWaterTargets
        let plan = TrimPlan(
            count: limits.count.flatMap { totals.count > $0 ? targets.count : nil },
            cost: limits.cost.flatMap { totals.bytes > $0 ? targets.cost : nil },
            accessedBefore: ageLimit.map { now.cutoff(forAge: $0) })
        return try commitQueueAndTrim(plan, now: now)
    }
}
