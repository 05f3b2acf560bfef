import Foundation
import Logging
import Metrics
import Synchronization

/// The disk tier of one directory in this process, shared by every ``DiskCache`` handle on it.
///
/// Callers encode records on their own threads and queue them in ``PendingWrites``; the
/// environment's writer thread commits the queue in batches (one transaction each), together with
/// the access times reads have collected, then trims to the low-water mark when a limit is passed.
/// Reads look at the queue first, then at LMDB through a pooled read transaction.
final class DiskStore: Sendable {
    let env: Environment
    /// The opened cache directory; every file of the store is reached through it.
    let directory: StoreDirectory
    /// The directory as the caller named it, for messages.
    let path: String
    let db: DiskDatabases
    private let state = Locked(PendingWrites())
    /// `state.pendingKeyCount`, readable without the lock: most reads find no queued write and
    /// skip the lock. A thread's own writes are counted before its next read (program order).
    private let pendingKeys = Atomic<Int>(0)
    /// Broadcast after every batch, so flushes, synchronous writes and full queues can wait.
    private let progress = NSCondition()
    private let logger: Logger
    private let damagedRecords = Counter(label: "lmdbcache_disk_damaged_records_total")
    /// Told of every entry trimming evicts, on `evictionQueue`, keyed by a token.
    private let evictionObservers = Locked<(next: UInt64, observers: [UInt64: EvictionObserver])>((0, [:]))
    private let evictionQueue = DiskStore.makeEvictionQueue()
    /// Marks an eviction queue with its own identity, so code running on it can tell.
    private static let evictionQueueKey = DispatchSpecificKey<ObjectIdentifier>()
    private let failedWrites = Counter(label: "lmdbcache_disk_failed_writes_total")
    /// Queued writes dropped because their batch failed (a full disk), for ``Cache/statistics``.
    private let droppedWrites = Atomic<Int>(0)
    private let evictionMetrics = DiskEvictionMetrics()

    /// Most writes committed in one transaction.
    static let maxBatchWrites = 1_000
    /// Most bytes committed in one transaction (LMDB caps a transaction's dirty pages).
    static let maxBatchBytes = 64 << 20
    /// Most entries one trim transaction removes, so a trim never holds the writer long.
    static let trimBatchSize = 256
    /// Most removals per transaction of an emergency trim on a full volume: every transaction
    /// copies the pages it changes, and the pages it frees are reusable only two transactions
    /// later, so small transactions are what fit in the space reserve.
    static let emergencyTrimBatchSize = 16
    /// Buffered access times that make the writer commit them without waiting for a write, and
    /// the most one transaction records.
    static let accessBatchSize = 1_000
    /// Most access times buffered; later ones are dropped until the writer catches up.
    static let maxBufferedAccesses = 100_000

    static let registry = DirectoryRegistry<DiskStore>()

    /// For ``DiskCache/Durability/periodic(syncInterval:)``: how often the writer syncs.
    private let syncInterval: Duration?
    private let syncScheduled = Locked(false)
    private let reserve: SpaceReserve
    let presence: ProcessPresence

    init(directory: StoreDirectory, options: Environment.Options, syncInterval: Duration?, logger: Logger) throws {
        // Presence first: a process compacting or setting the file aside holds it exclusively, and
        // LMDB must not map the file until that is over.
        presence = try ProcessPresence(
            directory: directory, readOnly: options.readOnly, timeout: options.openTimeout, logger: logger)
        do {
            env = try Environment.open(directory: directory, options: options, presence: presence, logger: logger)
        } catch {
            presence.close()
            throw error
        }
        self.directory = directory
        path = directory.path
        self.syncInterval = syncInterval
        db = DiskDatabases(env.databases)
        self.logger = logger
        isReadOnly = options.readOnly
        reserve = SpaceReserve(directory: directory)
        if !isReadOnly { reserve.take() }
        do {
            // A read first: an open of a store in the current format takes no write transaction,
            // so another process holding LMDB's writer lock (a stopped `cache-dump put`) cannot
            // hold it up.
            let stored = try env.read { txn in try Totals.load(txn, db.info, Totals.formatKey) }
            try checkFormat(stored)
            if !isReadOnly && stored < UInt64(Record.formatVersion) {
                try env.writer.sync {
                    try env.write { txn in
                        let stored = try Totals.load(txn, db.info, Totals.formatKey)
                        try checkFormat(stored)
                        // Older versions of the library must not read this format's records, so the
                        // store says which format it now holds.
                        if stored < UInt64(Record.formatVersion) {
                            try Totals.store(txn, db.info, Totals.formatKey, UInt64(Record.formatVersion))
                        }
                    }
                }
            }
        } catch {
            env.close()
            presence.close()
            throw error
        }
    }

    /// True when opened only to inspect the store (`cache-dump`): nothing is ever written.
    let isReadOnly: Bool

    /// Refuses a store written in a newer record format. `stored` comes from the file: a damaged
    /// value past `Int.max` is reported as `Int.max`.
    private func checkFormat(_ stored: UInt64) throws {
        if stored > UInt64(Record.formatVersion) {
            throw CacheError.unsupportedFormat(
                path: path, found: Int(clamping: stored), supported: Int(Record.formatVersion))
        }
    }

    /// Commits everything queued, syncs, and closes the environment. The last handle calls it.
    func close() {
        if !isReadOnly { try? commitAndSync() }
        env.close()
        // A closed store no longer counts as a process on it, even while handles still refer to it.
        presence.close()
    }

    // MARK: Eviction events

    /// Receives batches of evicted entries, in eviction order, on a queue of its own (never the
    /// writer thread, so it may call back into the cache).
    typealias EvictionObserver = @Sendable ([DiskEviction]) -> Void

    /// Starts telling `observer` of evictions; returns the token that stops it.
    func observeEvictions(_ observer: @escaping EvictionObserver) -> UInt64 {
        evictionObservers.withLock { state in
            state.next += 1
            state.observers[state.next] = observer
            return state.next
        }
    }

    func stopObservingEvictions(_ token: UInt64) {
        _ = evictionObservers.withLock { $0.observers.removeValue(forKey: token) }
    }

    private var isObserved: Bool {
        evictionObservers.withLock { !$0.observers.isEmpty }
    }

    private func publish(_ evictions: [DiskEviction]) {
        guard !evictions.isEmpty else { return }
        let observers = evictionObservers.withLock { Array($0.observers.values) }
        guard !observers.isEmpty else { return }
        evictionQueue.async {
            for observer in observers { observer(evictions) }
        }
    }

    private static func makeEvictionQueue() -> DispatchQueue {
        let queue = DispatchQueue(label: "LMDBCache.DiskStore.evictions")
        queue.setSpecific(key: evictionQueueKey, value: ObjectIdentifier(queue))
        return queue
    }

    /// Waits until every eviction event published so far has been delivered. On the eviction
    /// queue itself (an observer closing its cache) it returns at once: the events before the
    /// running one are delivered, and waiting for the queue there would wait for itself.
    func waitForEvictionEvents() {
        if DispatchQueue.getSpecific(key: Self.evictionQueueKey) == ObjectIdentifier(evictionQueue) { return }
        evictionQueue.sync {}
    }

    // MARK: Writes

    /// Queues `operation`; with `synchronous`, returns once it is committed and synced.
    /// Waits first while more than `maxPendingBytes` are queued.
    func enqueue(
        _ key: StorageKey, _ operation: PendingOperation, limits: DiskLimits, synchronous: Bool, maxPendingBytes: Int
    ) throws {
        var queued: (sequence: UInt64, schedule: Bool)?
        while true {
            // One lock for the common case; only a full queue takes the waiting path.
            queued = state.withLock { pending in
                guard pending.queuedBytes <= maxPendingBytes else { return nil }
                let sequence = pending.enqueue(key, operation, limits: limits)
                pendingKeys.store(pending.pendingKeyCount, ordering: .releasing)
                if synchronous { pending.requestSync(through: sequence) }
                return (sequence, scheduleDrain(&pending))
            }
            if queued != nil { break }
            try waitUntil { $0.queuedBytes <= maxPendingBytes }
        }
        let (sequence, schedule) = queued!
        if schedule { startDrain() }
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
    private func commitAndSync() throws {
        try env.writer.sync {
            drain()
            try env.sync()
        }
    }

    /// The newest queued write for `key`, if it is not committed yet.
    func pending(_ key: StorageKey) -> PendingOperation? {
        if pendingKeys.load(ordering: .acquiring) == 0 { return nil }
        return state.withLock { $0.pending(key) }
    }

    /// Buffers a read's access time; the writer records it with its next batch.
    func recordAccess(_ key: StorageKey, at time: UInt64, previous: UInt64) {
        let schedule = state.withLock { pending in
            pending.recordAccess(key, at: time, previous: previous, limit: Self.maxBufferedAccesses)
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

    /// Commits batches until the queue is empty. Runs on the writer thread.
    func drain() {
        while commitNextBatch(enforcingLimits: true) != nil {}
    }

    /// What committing a batch left to do.
    private enum Committed {
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
    private func commitNextBatch(enforcingLimits: Bool) -> Committed? {
        guard
            let batch = state.withLock({
                $0.takeBatch(
                    maxWrites: Self.maxBatchWrites, maxBytes: Self.maxBatchBytes, maxAccesses: Self.accessBatchSize)
            })
        else {
            return nil
        }
        var failure: CacheError?
        var outcome = Committed.done
        if !batch.isEmpty {
            do {
                let (totals, added) = try commitWithEmergencyTrim(batch)
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
        if state.withLock({ $0.syncDue }) {
            var syncFailure: CacheError?
            do {
                try env.sync()
            } catch {
                syncFailure = error as? CacheError ?? .lmdb(code: -1, operation: "mdb_env_sync", message: "\(error)")
                logger.error(
                    "LMDBCache could not sync its store", metadata: ["path": .escaped(path), "error": .escaped(error)])
            }
            state.withLock { $0.markSynced(failure: syncFailure) }
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
    private func commitWithEmergencyTrim(_ batch: WriteBatch) throws -> (Totals, Int) {
        do {
            return try env.write { txn in try apply(batch, txn) }
        } catch CacheError.diskFull where !batch.writes.isEmpty {
            let totals = try self.totals()
            let released = reserve.release()
            logger.info(
                "LMDBCache found the disk full; evicting and retrying once",
                metadata: [
                    "path": .escaped(path), "batchBytes": "\(batch.byteCount)", "reserveReleased": "\(released)",
                ])
            // Later queued writes must not commit before this batch: no commits between the trim's
            // transactions.
            try trim(
                TrimPlan(
                    cost: max(0, totals.bytes - max(2 * batch.byteCount, 2 * SpaceReserve.size)), reason: .freeSpace,
                    batchSize: Self.emergencyTrimBatchSize),
                now: batch.limits?.clock.milliseconds ?? 0, committingQueuedWrites: false)
            // LMDB reuses the pages a transaction frees only two transactions later: commit one
            // small change first, so the retry can use the pages the trim freed.
            try env.write { txn in
                let trims = try Totals.load(txn, db.info, Totals.emergencyTrimsKey)
                try Totals.store(txn, db.info, Totals.emergencyTrimsKey, trims + 1)
            }
            let result = try env.write { txn in try apply(batch, txn) }
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

    /// In periodic mode, has the writer sync once `syncInterval` after a commit (one pending sync
    /// at a time), so unsynced commits are at most that old.
    private func schedulePeriodicSync() {
        guard let syncInterval,
            syncScheduled.withLock({ scheduled in
                defer { scheduled = true }
                return !scheduled
            })
        else { return }
        let seconds = Double(syncInterval.components.seconds) + Double(syncInterval.components.attoseconds) / 1e18
        DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
            env.writer.async { [self] in
                syncScheduled.withLock { $0 = false }
                do {
                    try env.sync()
                } catch {
                    logger.error(
                        "LMDBCache could not sync its store",
                        metadata: ["path": .escaped(path), "error": .escaped(error)])
                }
            }
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

    /// Applies `batch` in `txn`; returns the totals after it and the bytes it added (negative when
    /// it freed more).
    private func apply(_ batch: WriteBatch, _ txn: WriteTransaction) throws -> (Totals, Int) {
        var totals = try Totals(txn, db.info)
        let before = totals
        for write in batch.writes {
            guard case .set(let record) = write.operation else {
                try removeEntry(write.key.bytes, txn, &totals)
                continue
            }
            try record.withUnsafeBytes { bytes in
                // One search when the key is new; an overwrite removes the old entry first.
                if try !txn.putIfAbsent(db.records, write.key.bytes, bytes) {
                    try removeEntry(write.key.bytes, txn, &totals)
                    try txn.put(db.records, write.key.bytes, bytes)
                }
                let header = Record.Header(bytes)!
                try txn.put(db.access, DiskDatabases.indexKey(time: header.created, key: write.key.bytes), [])
                if header.expires != 0 {
                    try txn.put(db.expiry, DiskDatabases.indexKey(time: header.expires, key: write.key.bytes), [])
                }
            }
            totals.count += 1
            totals.bytes += Totals.cost(keyLength: write.key.bytes.count, recordLength: record.count)
        }
        // Three small writes an access, no record read: the index entry for the time the reader
        // saw is moved; if it is gone, the entry changed since and the access is dropped.
        for (key, update) in batch.accesses where update.previous < update.time {
            guard try txn.delete(db.access, DiskDatabases.indexKey(time: update.previous, key: key.bytes)) else {
                continue
            }
            try withUnsafeBytes(of: update.time.littleEndian) { try txn.put(db.lastAccess, key.bytes, $0) }
            try txn.put(db.access, DiskDatabases.indexKey(time: update.time, key: key.bytes), [])
        }
        for key in batch.damaged {
            guard let bytes = try txn.get(db.records, key.bytes) else { continue }
            if (try? Record.validate(bytes, storedKey: key.bytes)) == nil {
                try removeEntry(key.bytes, txn, &totals)
            }
        }
        // After the batch's writes, in the same transaction: a write queued before the check
        // replaced the record and is kept; one queued after it commits after the removal.
        for (key, identity) in batch.removalsIfUnchanged {
            guard let bytes = try txn.get(db.records, key.bytes), RecordIdentity(bytes) == identity else { continue }
            try removeEntry(key.bytes, txn, &totals)
        }
        if totals != before { try totals.save(txn, db.info) }
        return (totals, totals.bytes - before.bytes)
    }

    /// Removes the entry stored under `key` with its index entries, if there is one.
    private func removeEntry(_ key: [UInt8], _ txn: WriteTransaction, _ totals: inout Totals) throws {
        guard let bytes = try txn.get(db.records, key) else { return }
        let cost = Totals.cost(keyLength: key.count, recordLength: bytes.count)
        let header = Record.Header(bytes)
        // `bytes` points into the map: read all of it before the first change.
        if let header {
            let accessed = try db.lastAccess(txn, key, created: header.created)
            try txn.delete(db.access, DiskDatabases.indexKey(time: accessed, key: key))
            if header.expires != 0 {
                try txn.delete(db.expiry, DiskDatabases.indexKey(time: header.expires, key: key))
            }
        }
        // A record with a damaged header leaves index entries behind; trimming drops them when it
        // reaches them (see `evictThroughIndex`).
        try txn.delete(db.lastAccess, key)
        try txn.delete(db.records, key)
        totals.count -= 1
        totals.bytes -= cost
    }

    // MARK: Trimming

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
                return (done, before.count - totals.count)
            }
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
            guard removed < plan.batchSize else { return false }
            try evictThroughIndex(first, time: time, key: key, index: db.access, txn, &totals) { fullKey, bytes in
                evicted(DiskEviction(key: fullKey, reason: plan.reason ?? reason, bytes: bytes))
            }
            removed += 1
        }
        return true
    }

    /// Removes the entry an index entry points to; an index entry that no longer matches its
    /// record (left by a damaged record) is dropped on its own, so trimming always progresses.
    /// `removed` gets the full key and the bytes of an entry the index entry pointed to and that
    /// was removed.
    private func evictThroughIndex(
        _ indexKey: [UInt8], time: UInt64, key: [UInt8], index: Database, _ txn: WriteTransaction,
        _ totals: inout Totals, removed: ([UInt8], Int) -> Void
    ) throws {
        if let bytes = try txn.get(db.records, key) {
            let matches: Bool
            var fullKey: [UInt8]?  // nil for a damaged record: not reported as an eviction
            if let header = Record.Header(bytes) {
                matches =
                    index == db.access
                    ? try db.lastAccess(txn, key, created: header.created) == time : header.expires == time
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
    }

    /// Removes every entry. Writer only.
    func removeAll() throws {
        drain()
        try env.write { txn in
            try txn.empty(db.records)
            try txn.empty(db.lastAccess)
            try txn.empty(db.access)
            try txn.empty(db.expiry)
            try Totals().save(txn, db.info)
        }
    }

    // MARK: Compaction

    /// Commits the queue, then rewrites the file without free pages and swaps it in.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has the store open.
    func compact() throws {
        try env.writer.sync {
            drain()
            try env.sync()
            let done: Void? = try presence.alone { try env.compactInPlace() }
            if done == nil { throw CacheError.storeInUse(path: path, operation: "compact") }
        }
    }

    /// Bytes of the data file.
    var fileSize: Int {
        var info = stat()
        return fstatat(directory.descriptor, StoreFiles.data, &info, 0) == 0 ? Int(info.st_size) : 0
    }

    /// Queued writes dropped so far because their batch could not be committed.
    var droppedWriteCount: Int { droppedWrites.load(ordering: .relaxed) }

    // MARK: Reads

    /// Committed totals (other processes' commits included).
    func totals() throws -> Totals {
        try env.read { try Totals($0, db.info) }
    }
}

/// An entry trimming removed from the disk tier.
struct DiskEviction: Sendable {
    /// The key as the user gave it (the full key of a long key).
    var key: [UInt8]
    var reason: RemovalReason
    /// The bytes it occupied (stored key and record).
    var bytes: Int
}

/// Entries and bytes one trim transaction evicted, by reason, for the metrics.
struct EvictionTally {
    private var entries = [Int](repeating: 0, count: RemovalReason.allCases.count)
    private var bytes = [Int](repeating: 0, count: RemovalReason.allCases.count)

    mutating func add(_ eviction: DiskEviction) {
        entries[eviction.reason.index] += 1
        bytes[eviction.reason.index] += eviction.bytes
    }

    func report(to metrics: DiskEvictionMetrics) {
        for reason in RemovalReason.allCases where entries[reason.index] > 0 {
            metrics.entries[reason.index].increment(by: entries[reason.index])
            metrics.bytes[reason.index].increment(by: bytes[reason.index])
        }
    }
}

/// `lmdbcache_disk_evictions_total{reason}` and `lmdbcache_disk_evicted_bytes_total{reason}`: what
/// trimming removed from a store, whichever handle or cache asked.
struct DiskEvictionMetrics: Sendable {
    let entries = RemovalReason.allCases.map {
        Counter(label: "lmdbcache_disk_evictions_total", dimensions: [("reason", $0.rawValue)])
    }
    let bytes = RemovalReason.allCases.map {
        Counter(label: "lmdbcache_disk_evicted_bytes_total", dimensions: [("reason", $0.rawValue)])
    }
}
