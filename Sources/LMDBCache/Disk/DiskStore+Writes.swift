import Foundation
import LMDBCacheStorage

// The write queue and its commits: callers queue, the writer thread commits in batches, syncs,
// and trims when a batch passes the limits or the volume is short of space.
extension DiskStore {
    /// Queues `operation`, made by `origin` (``CacheChange/origin``); with `synchronous`, returns
    /// once it is committed and synced. Waits first while more than `maxPendingBytes` are queued.
    func enqueue(
        _ key: StorageKey, _ operation: PendingOperation, origin: UInt64 = 0, limits: DiskLimits, synchronous: Bool,
        maxPendingBytes: Int
    ) throws {
        var queued: (sequence: UInt64, schedule: Bool)?
        while true {
            // One lock for the common case; only a full queue takes the waiting path.
            queued = state.withLock { pending in
                guard pending.queuedBytes <= maxPendingBytes else { return nil }
                let sequence = pending.enqueue(key, operation, origin: origin, limits: limits)
                pendingKeys.store(pending.pendingKeyCount, ordering: .releasing)
                if synchronous { pending.requestSync(through: sequence) }
                return (sequence, scheduleDrain(&pending))
            }
            if queued != nil { break }
            try waitUntil { $0.queuedBytes <= maxPendingBytes }
        }
        let (sequence, schedule) = queued!
        // A synchronous write waits for its commit anyway: with the writer idle, the caller
        // commits and syncs on its own thread, sparing two thread hand-offs, and leaves what
        // others queued meanwhile to the writer.
        if schedule, !synchronous || env.writer.runHereIfIdle({ commitUntilSynced(sequence) }) != false {
            startDrain()
        }
        if synchronous {
            try waitUntil { $0.syncedThrough >= sequence }
            if let error = state.withLock({ $0.takeSynchronousResult(sequence) }) { throw error }
        }
    }

    /// Commits and syncs every write queued so far, with the access times and damaged records
    /// reads reported; throws the first write failure since the last flush.
    func flush() throws {
        try commitAndSync()
        if let error = state.withLock({ $0.takeUnreportedFailure() }) { throw error }
    }

    /// Drains the queue on the writer, then syncs the file.
    func commitAndSync() throws {
        try env.writer.sync {
            drain()
            try env.sync()
        }
    }

    /// Bytes queued and not yet committed.
    var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// The newest queued write for `key`, if it is not committed yet.
    func pending(_ key: StorageKey) -> PendingOperation? {
        if pendingKeys.load(ordering: .acquiring) == 0 { return nil }
        return state.withLock { $0.pending(key) }
    }

    /// Buffers a use at `time` of the entry whose record was written at `created`; the writer
    /// records it with its next batch.
    func recordAccess(_ key: StorageKey, at time: UInt64, created: UInt64) {
        let schedule = state.withLock { pending in
            pending.recordAccess(key, at: time, created: created, limit: Self.maxBufferedAccesses)
            return pending.accessCount >= Self.accessBatchSize && scheduleDrain(&pending)
        }
        if schedule { startDrain() }
    }

    /// Logs and counts a damaged record, and has the writer remove it.
    func reportDamage(_ key: StorageKey, _ damage: Record.Damage) {
        // Not thrown (the read is a miss), so it is logged above info: the one sign besides the metric.
        logger.warning(
            "LMDBCache found a damaged record; treating it as a miss and removing it",
            metadata: ["path": .escaped(path), "damage": "\(damage)"])
        damagedRecords.increment()
        let schedule = state.withLock { pending in
            pending.recordDamage(key)
            return scheduleDrain(&pending)
        }
        if schedule { startDrain() }
    }

    /// Has the writer remove the record of `key` if it is still the one `identity` names: a
    /// reader's removal of a record it could not use, which must not remove a newer write.
    func removeIfUnchanged(_ key: StorageKey, _ identity: RecordIdentity) {
        let schedule = state.withLock { pending in
            pending.recordRemoval(key, ifUnchanged: identity)
            return scheduleDrain(&pending)
        }
        if schedule { startDrain() }
    }

    private func scheduleDrain(_ pending: inout PendingWrites) -> Bool {
        if pending.drainScheduled { return false }
        pending.drainScheduled = true
        return true
    }

    private func startDrain() {
        env.writer.async { [self] in drain() }
    }

    private func waitUntil(_ condition: (PendingWrites) -> Bool) throws {
        progress.lock()
        defer { progress.unlock() }
        while !state.withLock({ condition($0) }) { progress.wait() }
    }

    // MARK: The writer

    /// Commits what was queued when it began: writes, access times, damaged records (at least
    /// one batch). What arrives meanwhile goes to a drain job queued behind the writer's other
    /// jobs, so a steady stream of reads (each may queue an access time) cannot hold the writer
    /// in one drain and keep a flush, a trim or a synchronous write waiting. Runs on the writer
    /// thread.
    func drain() {
        var target = state.withLock { $0.drainTarget }
        while commitNextBatch(enforcingLimits: true) != nil {
            guard state.withLock({ $0.hasTaken(&target) }) else { continue }
            if state.withLock({ $0.endDrainIfIdle() }) { return }
            // Work arrived meanwhile, and the drain stays scheduled: a new job takes it after the
            // writer's other jobs. A stopping writer takes no new job: this one goes on.
            if env.writer.async({ [self] in drain() }) { return }
        }
    }

    /// Read once: Foundation reads it from cgroup files on every call.
    private static let processorCount = ProcessInfo.processInfo.activeProcessorCount

    /// `writes` with the records left to the writer built: on every core when there are many, so
    /// the deflate callers were spared does not make the writer the one core that deflates.
    static func buildRecords(_ writes: [QueuedWrite]) -> [QueuedWrite] {
        let deferred = writes.indices.filter {
            if case .setDeflatingLater = writes[$0].operation { return true }
            return false
        }
        let lanes = deferred.count < 16 ? 1 : min(processorCount, deferred.count / 8)
        guard lanes > 1 else { return writes.map { $0.withRecordBuilt() } }
        var built = writes
        built.withUnsafeMutableBufferPointer { buffer in
            // Each lane writes its own elements only.
            nonisolated(unsafe) let output = buffer
            DispatchQueue.concurrentPerform(iterations: lanes) { lane in
                for index in stride(from: lane, to: deferred.count, by: lanes) {
                    output[deferred[index]] = writes[deferred[index]].withRecordBuilt()
                }
            }
        }
        return built
    }

    /// Commits batches until write `sequence` is committed and synced. Returns false when it
    /// emptied the queue (the drain is no longer scheduled), true when it stopped with the drain
    /// still scheduled, for the writer to take over what others queued meanwhile. Runs on the
    /// writer thread or in its place.
    private func commitUntilSynced(_ sequence: UInt64) -> Bool {
        while state.withLock({ $0.syncedThrough < sequence }) {
            if commitNextBatch(enforcingLimits: true) == nil { return false }
        }
        // With nothing left, the drain ends here: left scheduled, the writer would wake only to
        // find the queue empty, and the caller's next synchronous write, finding a drain
        // scheduled, would wait for the writer instead of committing itself.
        return state.withLock { !$0.endDrainIfIdle() }
    }

    /// What committing a batch left to do.
    enum Committed {
        /// Nothing: the limits hold, or were enforced.
        case done
        /// The batch took the store past `limits` (`exceeded`), or added `added` bytes under their
        /// free-space limit; neither was enforced.
        case limitsPassed(DiskLimits, exceeded: Bool, added: Int)
    }

    /// Commits one batch; nil when there was none. With `enforcingLimits`, a batch that takes
    /// the store past its newest insert's limits is followed by a trim to the low-water mark
    /// before its writers are told it is done, so a flush returns with the limits holding;
    /// without, such limits are returned for the caller (a trim under way) to enforce after.
    func commitNextBatch(enforcingLimits: Bool) -> Committed? {
        guard
            var batch = state.withLock({
                $0.takeBatch(
                    maxWrites: Self.maxBatchWrites, maxBytes: Self.maxBatchBytes, maxAccesses: Self.maxAccessesPerBatch)
            })
        else {
            return nil
        }
        // Records the callers left to the writer are built (deflated) here, outside the
        // transaction, which other processes' writers wait for.
        batch.writes = Self.buildRecords(batch.writes)
        var failure: CacheError?
        var outcome = Committed.done
        var syncedByCommit = false
        if !batch.isEmpty {
            do {
                let applied = try commitWithEmergencyTrim(batch)
                syncedByCommit = batch.completesSyncRequest && env.options.sync == .everyCommit
                let (totals, added) = (applied.totals, applied.added)
                // Counted and noted once committed: a replayed transaction's body may run twice.
                accessUpdates.increment(by: applied.moved)
                oldestAccess.store(applied.oldestAccess, ordering: .relaxed)
                if let limits = batch.limits {
                    if !enforcingLimits {
                        let spaceShort = limits.freeSpace != nil && added > 0
                        let exceeded = limits.isExceeded(by: totals)
                        if exceeded || spaceShort {
                            outcome = .limitsPassed(limits, exceeded: exceeded, added: spaceShort ? added : 0)
                        }
                    } else {
                        if limits.isExceeded(by: totals) { enforce(limits) }
                        keepFreeSpace(limits, added: added, totals: totals)
                    }
                }
            } catch {
                let cacheError = error as? CacheError ?? .lmdb(code: -1, operation: "write", message: "\(error)")
                failure = cacheError
                failedWrites.increment(by: batch.writes.count)
                droppedWrites.add(batch.writes.count, ordering: .relaxed)
                // The uses it would have recorded are lost: their next reads record them again.
                for (key, _) in batch.accesses { recentAccesses.forget(key) }
                // flush() or the synchronous write throws it; a full disk is also logged as an
                // error, since writes are being lost until space is freed.
                logger.log(
                    level: cacheError == .diskFull(path: path) ? .error : .info, "LMDBCache dropped a batch of writes",
                    metadata: ["path": .escaped(path), "writes": "\(batch.writes.count)", "error": "\(cacheError)"])
            }
        }
        state.withLock { pending in
            pending.complete(batch, error: failure)
            pendingKeys.store(pending.pendingKeyCount, ordering: .releasing)
        }
        if syncedByCommit {
            // Its durable commit synced it and every commit before it.
            state.withLock { $0.markSynced() }
        } else if state.withLock({ $0.syncDue }) {
            var syncFailure: CacheError?
            do {
                try env.sync()
            } catch {
                syncFailure = error as? CacheError ?? .lmdb(code: -1, operation: "mdb_env_sync", message: "\(error)")
                logger.error(
                    "LMDBCache could not sync its store", metadata: ["path": .escaped(path), "error": .escaped(error)])
            }
            state.withLock { $0.markSynced(failure: syncFailure) }
        } else if pinsTooMuch() {
            syncLoggingFailure()
        }
        progress.lock()
        progress.broadcast()
        progress.unlock()
        if !batch.writes.isEmpty { schedulePeriodicSync() }
        return outcome
    }

    /// Commits `batch`; when the volume is full (or the map cannot grow), frees the space reserve,
    /// evicts least recently used entries of twice the batch's bytes (at least 2 MiB) and tries
    /// once more. Returns the totals after the
    /// commit and the bytes it added.
    private func commitWithEmergencyTrim(_ batch: WriteBatch) throws -> Applied {
        do {
            return try env.write(durably: batch.completesSyncRequest) { txn in try apply(batch, txn) }
        } catch CacheError.diskFull where !batch.writes.isEmpty {
            let totals = try self.totals()
            let released = reserve.release()
            logger.info(
                "LMDBCache found the disk full; evicting and retrying once",
                metadata: [
                    "path": .escaped(path), "batchBytes": "\(batch.builtByteCount)", "reserveReleased": "\(released)",
                ])
            // Later queued writes must not commit before this batch: no commits between the trim's
            // transactions.
            try trim(
                TrimPlan(
                    cost: max(0, totals.bytes - max(2 * batch.builtByteCount, 2 * SpaceReserve.size)),
                    reason: .freeSpace,
                    batchSize: Self.emergencyTrimBatchSize),
                now: batch.limits?.clock.milliseconds ?? 0, committingQueuedWrites: false)
            // LMDB reuses the pages a transaction frees only two transactions later: commit one
            // small change first, so the retry can use the pages the trim freed.
            try env.write { txn in
                let trims = try Totals.load(txn, db.info, Totals.emergencyTrimsKey)
                try Totals.store(txn, db.info, Totals.emergencyTrimsKey, trims + 1)
            }
            let result = try env.write(durably: batch.completesSyncRequest) { txn in try apply(batch, txn) }
            reserve.take()
            return result
        }
    }

    /// With a free-space limit and the volume below it, evicts least recently used entries of the
    /// `added` bytes the batch just committed, so the store does not grow while space is short.
    private func keepFreeSpace(_ limits: DiskLimits, added: Int, totals: Totals) {
        guard let limit = limits.freeSpace, added > 0, let free = VolumeSpace.available(at: directory.resolved),
            free < limit
        else {
            return
        }
        do {
            try trim(
                TrimPlan(cost: max(0, totals.bytes - added), reason: .freeSpace), now: limits.clock.milliseconds)
        } catch {
            logger.error(
                "LMDBCache could not trim to its free-space limit",
                metadata: ["path": .escaped(path), "error": .escaped(error)])
        }
    }

    /// In periodic mode, whether the pages freed since the last sync reached
    /// ``freedBytesBeforeSync``: LMDB reuses none of them before the next sync, so until then
    /// every overwrite takes new pages at the end of the file.
    private func pinsTooMuch() -> Bool {
        guard syncInterval != nil else { return false }
        do {
            return try env.bytesFreedSinceSync() >= freedBytesBeforeSync
        } catch {
            return false
        }
    }

    /// In periodic mode, has the writer sync once `syncInterval` after a commit (one pending sync
    /// at a time), so unsynced commits are at most that old.
    private func schedulePeriodicSync() {
        guard let syncInterval,
            syncScheduled.withLock({ scheduled in
                defer { scheduled = true }
                return !scheduled
            })
        else { return }
        DispatchQueue.global().asyncAfter(deadline: .now() + syncInterval.timeInterval) { [self] in
            env.writer.async { [self] in
                syncScheduled.withLock { $0 = false }
                syncLoggingFailure()
            }
        }
    }

    /// A sync no caller waits for (periodic mode's): a failure is logged, and the next sync a
    /// caller asks for (`flush()`) tries again and reports its own outcome.
    private func syncLoggingFailure() {
        do {
            try env.sync()
        } catch {
            logger.error(
                "LMDBCache could not sync its store", metadata: ["path": .escaped(path), "error": .escaped(error)])
        }
    }

    /// Trims to the low-water mark of `limits`.
    private func enforce(_ limits: DiskLimits) {
        let targets = limits.lowWaterTargets
        let plan = TrimPlan(count: targets.count, cost: targets.cost)
        do {
            try trim(plan, now: limits.clock.milliseconds)
        } catch {
            logger.error(
                "LMDBCache could not trim to its limits", metadata: ["path": .escaped(path), "error": .escaped(error)])
        }
    }

    /// Removes every entry, queued writes included, and commits (on the writer), logging the
    /// change as `origin`'s.
    func removeAll(origin: UInt64 = 0) throws {
        try env.writer.sync {
            drain()
            try env.write { txn in
                try txn.empty(db.records)
                try txn.empty(db.lastAccess)
                try txn.empty(db.access)
                try txn.empty(db.expiry)
                try txn.empty(db.tags)
                try Totals().save(txn, db.info)
                try appendChanges([CacheChange(kind: .all, origin: origin)], txn)
            }
        }
    }

    /// Queued writes dropped so far because their batch could not be committed.
    var droppedWriteCount: Int { droppedWrites.load(ordering: .relaxed) }
}
