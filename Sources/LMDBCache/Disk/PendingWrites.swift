/// A write accepted by ``DiskCache`` but not yet committed.
enum PendingOperation: Sendable {
    /// Store this encoded ``Record``.
    case set(record: [UInt8])
    /// Store the record of this value, which the writer builds (and deflates) before the commit.
    case setDeflatingLater(DeferredRecord)
    case remove
}

/// A value whose record the writer builds: one that deflate may shrink, queued by a caller that
/// need not wait for deflate. Reads of the key serve the value itself until the commit.
struct DeferredRecord: Sendable {
    let value: [UInt8]
    /// Milliseconds since 1970 of the write, and of its expiry (0 for never).
    let created: UInt64
    let expires: UInt64
    /// Milliseconds since 1970 until which it is kept past `expires` for reads that ask for stale
    /// entries; 0 for none (see ``Record/Header/staleUntil``).
    var staleUntil: UInt64 = 0
    /// The entry's tags.
    var tags: EntryTags = .none
    let threshold: Int?
    let level: Int

    /// The record, as ``Record/encode(value:key:now:expires:staleUntil:tags:threshold:level:)`` builds it.
    func record(for key: StorageKey) -> [UInt8] {
        value.withUnsafeBytes {
            Record.encode(
                value: $0, key: key, now: created, expires: expires, staleUntil: staleUntil, tags: tags,
                threshold: threshold, level: level)
        }
    }

    /// The bytes its record holds before the payload, the full key aside: the header (40 bytes
    /// with a stale window, else 32) and the tags.
    var headerSize: Int { Record.headerSize(version: Record.version(staleUntil: staleUntil)) + Record.tagsLength(tags) }

    /// True when past `expires`: never returned by a plain read.
    func isExpired(at now: UInt64) -> Bool { expires != 0 && expires <= now }

    /// True when past its stale window, or expired without one: returned by no read (as
    /// ``Record/Header/isPastRemovalDeadline(at:)``).
    func isPastRemovalDeadline(at now: UInt64) -> Bool {
        let deadline = staleUntil != 0 ? staleUntil : expires
        return deadline != 0 && deadline <= now
    }
}

/// Count and cost limits to enforce on write, with the low-water mark to trim down to.
struct DiskLimits: Sendable {
    var count: Int?
    var cost: Int?
    var lowWater: Double
    /// Bytes to keep free on the volume (``DiskCache/Configuration/freeSpaceLimit``).
    var freeSpace: Int? = nil
    /// The writing handle's clock, for the expiry the trim removes first.
    var clock: CacheClock

    /// The count and cost a trim for these limits goes down to: ``lowWater`` of each limit, never
    /// above the limit itself (`Double(Int.max)` rounds up past `Int.max`, so a product at the top
    /// of the range keeps the limit instead of converting).
    var lowWaterTargets: (count: Int?, cost: Int?) {
        (count.map { Self.fraction(lowWater, of: $0) }, cost.map { Self.fraction(lowWater, of: $0) })
    }

    /// `fraction` (0 to 1; NaN counts as 1) of `limit`, rounded down, within `0...max(0, limit)`.
    static func fraction(_ fraction: Double, of limit: Int) -> Int {
        let limit = max(0, limit)
        let product = Double(limit) * (fraction.isNaN ? 1 : min(max(fraction, 0), 1))
        guard product < Double(limit) else { return limit }
        return Int(product.rounded(.down))
    }

    func isExceeded(by totals: Totals) -> Bool {
        (count.map { totals.count > $0 } ?? false) || (cost.map { totals.bytes > $0 } ?? false)
    }
}

struct QueuedWrite: Sendable {
    let sequence: UInt64
    let key: StorageKey
    let operation: PendingOperation
    /// Who made it, for the change log (``CacheChange/origin``); 0 for a write made through no
    /// cache with a memory tier.
    let origin: UInt64
    /// The bytes it holds in the queue: the key and its record, for a record the writer builds
    /// the most it can take (undeflated). Fixed at enqueue, so the queue's count stays exact.
    let byteCount: Int

    init(sequence: UInt64, key: StorageKey, operation: PendingOperation, origin: UInt64 = 0) {
        self.sequence = sequence
        self.key = key
        self.operation = operation
        self.origin = origin
        switch operation {
        case .set(let record): byteCount = record.count + key.bytes.count
        case .setDeflatingLater(let deferred):
            byteCount = deferred.headerSize + (key.fullKey?.count ?? 0) + deferred.value.count + key.bytes.count
        case .remove: byteCount = key.bytes.count
        }
    }

    private init(_ write: QueuedWrite, record: [UInt8]) {
        sequence = write.sequence
        key = write.key
        origin = write.origin
        operation = .set(record: record)
        byteCount = write.byteCount
    }

    /// This write with its record built (the writer's half of a deferred write).
    func withRecordBuilt() -> QueuedWrite {
        guard case .setDeflatingLater(let deferred) = operation else { return self }
        return QueuedWrite(self, record: deferred.record(for: key))
    }
}

/// A read's note that an entry was used at `time`, when its record was written at `created`.
struct AccessUpdate: Sendable, Equatable {
    let time: UInt64
    /// The write time of the record the reader saw. The writer finds the entry's index entry from
    /// it (its recorded last access, else this) and moves exactly that one, so an entry rewritten
    /// or removed in the meantime is left alone.
    let created: UInt64
}

/// What the writer commits in one transaction.
struct WriteBatch: Sendable {
    var writes: [QueuedWrite] = []
    /// In the order reads noted them; a key may appear more than once (the writer moves its entry
    /// once per later time).
    var accesses: [(key: StorageKey, update: AccessUpdate)] = []
    var damaged: [StorageKey] = []
    /// Records to remove if their key still holds exactly that record, checked after `writes`.
    var removalsIfUnchanged: [StorageKey: RecordIdentity] = [:]
    var byteCount = 0
    /// The limits to enforce after the commit: those of the handle that wrote last.
    var limits: DiskLimits?
    /// True when a requested sync is due once it commits: its commit can sync itself, sparing
    /// the writer a second fdatasync.
    var completesSyncRequest = false

    /// The bytes its writes' keys and built records add at most: what an emergency trim makes
    /// room for (a record left to the writer counts once built).
    var builtByteCount: Int {
        writes.reduce(0) { total, write in
            guard case .set(let record) = write.operation else { return total + write.byteCount }
            return total + record.count + write.key.bytes.count
        }
    }

    /// True when it holds nothing to commit.
    var isEmpty: Bool {
        writes.isEmpty && accesses.isEmpty && damaged.isEmpty && removalsIfUnchanged.isEmpty
    }
}

/// The write-behind queue: writes in arrival order, the newest write per key (so reads see their
/// own writes before the commit), access times seen by reads, and damaged records to remove.
///
/// A plain value guarded by the store's lock. Sequence numbers order writes; a waiter for write
/// `n` is done when `committedThrough >= n` (and `syncedThrough >= n` when it asked for a sync).
struct PendingWrites {
    private var queue: [QueuedWrite] = []
    private var head = 0
    private var newest: [StorageKey: QueuedWrite] = [:]
    /// Noted uses in arrival order, from `accessHead` on: an append per read, and a batch is a
    /// slice, so neither a read nor the writer holds the lock for long however far the writer
    /// falls behind.
    private var accesses: [(key: StorageKey, update: AccessUpdate)] = []
    private var accessHead = 0
    /// Access times ever put in `accesses`, and ever taken from it into a batch.
    private var accessesQueued: UInt64 = 0
    private var accessesTaken: UInt64 = 0
    /// Access times recorded while their key had a write queued (an import's): applied before that
    /// write, they would find no index entry to move and be dropped, so they join `accesses` once
    /// it is done. Outside the buffer's limit: each waits on a queued write, and the queue is
    /// bounded by its bytes.
    private var accessesAwaitingWrite: [StorageKey: AccessUpdate] = [:]
    private var damaged: Set<StorageKey> = []
    private var removalsIfUnchanged: [StorageKey: RecordIdentity] = [:]
    private(set) var queuedBytes = 0
    private(set) var lastQueued: UInt64 = 0
    private(set) var committedThrough: UInt64 = 0
    private(set) var syncedThrough: UInt64 = 0
    private var syncRequestedThrough: UInt64 = 0
    /// Synchronous writes waiting for their commit, with the error of a batch that failed them.
    /// Kept until the waiter takes its result, however many batches fail meanwhile.
    private var synchronousWaiters: [UInt64: CacheError?] = [:]
    /// The first failure no `flush()` has reported yet.
    private(set) var unreportedFailure: CacheError?
    /// Set with a drain job queued (or a caller committing in the writer's place); cleared, under
    /// this lock, only by whoever finds nothing left. A drain that another writer job runs
    /// (flush, trim) may clear it too, or queue a second drain job: either is harmless, since
    /// the next write sets it again and an extra drain finds nothing to do.
    var drainScheduled = false
    /// The limits of the handle that queued the newest insert.
    private var limits: DiskLimits?

    var accessCount: Int { accesses.count - accessHead }
    /// Keys with an uncommitted write.
    var pendingKeyCount: Int { newest.count }

    /// Queues `operation` for `key`, under the writing handle's `limits`; returns its sequence number.
    mutating func enqueue(
        _ key: StorageKey, _ operation: PendingOperation, origin: UInt64 = 0, limits: DiskLimits
    ) -> UInt64 {
        self.limits = limits
        lastQueued += 1
        let write = QueuedWrite(sequence: lastQueued, key: key, operation: operation, origin: origin)
        queue.append(write)
        newest[key] = write
        queuedBytes += write.byteCount
        return lastQueued
    }

    /// The newest uncommitted write for `key`, if any.
    func pending(_ key: StorageKey) -> PendingOperation? {
        newest.isEmpty ? nil : newest[key]?.operation
    }

    /// Buffers an access time. Beyond `limit` buffered uses new ones are dropped: access order on
    /// disk is then a little less exact, and memory stays bounded when reads outrun the writer.
    mutating func recordAccess(_ key: StorageKey, at time: UInt64, created: UInt64, limit: Int) {
        if !newest.isEmpty, newest[key] != nil {
            // The latest use with the write it saw: an earlier read saw an earlier write, whose
            // index entry a later write replaces.
            if (accessesAwaitingWrite[key]?.time ?? 0) <= time {
                accessesAwaitingWrite[key] = AccessUpdate(time: time, created: created)
            }
        } else if accessCount < limit {
            accesses.append((key, AccessUpdate(time: time, created: created)))
            accessesQueued &+= 1
        }
    }

    mutating func recordDamage(_ key: StorageKey) {
        damaged.insert(key)
    }

    /// Asks the writer to remove the record of `key` if it is still `record` when the next batch
    /// commits. Not a queued write: reads do not see it, since it may come to nothing.
    mutating func recordRemoval(_ key: StorageKey, ifUnchanged record: RecordIdentity) {
        removalsIfUnchanged[key] = record
    }

    /// Asks for an fsync once everything through `sequence` is committed, and keeps the outcome
    /// of write `sequence` for ``takeSynchronousResult(_:)``.
    mutating func requestSync(through sequence: UInt64) {
        syncRequestedThrough = max(syncRequestedThrough, sequence)
        synchronousWaiters[sequence] = .some(nil)
    }

    /// The error of the failed batch that held synchronous write `sequence`, if it failed; forgets it.
    mutating func takeSynchronousResult(_ sequence: UInt64) -> CacheError? {
        synchronousWaiters.removeValue(forKey: sequence) ?? nil
    }

    /// True when a requested sync is due: its writes are committed but not yet synced.
    var syncDue: Bool {
        syncRequestedThrough > syncedThrough && committedThrough >= syncRequestedThrough
    }

    /// Marks everything committed as synced; with `failure` (the sync failed), the synchronous
    /// writes waiting for it throw it, and so does the next `flush()`.
    mutating func markSynced(failure: CacheError? = nil) {
        if let failure {
            for (sequence, result) in synchronousWaiters where sequence <= committedThrough && result == nil {
                synchronousWaiters[sequence] = failure
            }
            if unreportedFailure == nil { unreportedFailure = failure }
        }
        syncedThrough = committedThrough
    }

    /// Takes the next batch: up to `maxWrites` writes and `maxBytes` bytes (at least one write),
    /// up to `maxAccesses` buffered access times, and every damaged key. Nil, and the drain
    /// unscheduled, when idle.
    mutating func takeBatch(maxWrites: Int, maxBytes: Int, maxAccesses: Int) -> WriteBatch? {
        var batch = WriteBatch()
        batch.limits = limits
        while head < queue.count && batch.writes.count < maxWrites
            && (batch.writes.isEmpty || batch.byteCount + queue[head].byteCount <= maxBytes)
        {
            batch.writes.append(queue[head])
            batch.byteCount += queue[head].byteCount
            head += 1
        }
        if head == queue.count {
            queue.removeAll(keepingCapacity: queue.count < 4_096)
            head = 0
        } else if head > 4_096 {
            queue.removeFirst(head)
            head = 0
        }
        if accessHead == 0 && accesses.count <= maxAccesses {
            swap(&batch.accesses, &accesses)
        } else {
            let end = min(accesses.count, accessHead + maxAccesses)
            batch.accesses = Array(accesses[accessHead..<end])
            accessHead = end
            if accessHead == accesses.count {
                accesses.removeAll(keepingCapacity: true)
                accessHead = 0
            } else if accessHead > 4_096 && accessHead * 2 > accesses.count {
                accesses.removeFirst(accessHead)
                accessHead = 0
            }
        }
        accessesTaken &+= UInt64(batch.accesses.count)
        batch.damaged = Array(damaged)
        damaged.removeAll()
        swap(&batch.removalsIfUnchanged, &removalsIfUnchanged)
        if batch.isEmpty && !syncDue {
            drainScheduled = false
            return nil
        }
        batch.completesSyncRequest =
            !batch.isEmpty && syncRequestedThrough > syncedThrough
            && max(committedThrough, batch.writes.last?.sequence ?? 0) >= syncRequestedThrough
        return batch
    }

    /// What is queued now: a drain that takes this far has taken everything queued before it began.
    struct DrainTarget: Equatable {
        var writes: UInt64
        var accesses: UInt64
        /// Whether `accesses` counts those that waited for the writes through `writes`.
        var includesReleased = false
    }

    var drainTarget: DrainTarget { DrainTarget(writes: lastQueued, accesses: accessesQueued) }

    /// True once every write queued by `target` is done (committed or dropped) and every access
    /// time queued by then has been in a batch, those that waited for one of those writes
    /// included: they join the buffer when their write completes, so once the writes are done
    /// `target` grows to the buffer's count then (once: what arrives later is not waited for).
    func hasTaken(_ target: inout DrainTarget) -> Bool {
        guard committedThrough >= target.writes else { return false }
        if !target.includesReleased {
            target.accesses = max(target.accesses, accessesQueued)
            target.includesReleased = true
        }
        return accessesTaken >= target.accesses
    }

    /// Unschedules the drain when nothing is left for it (no write, access time, damaged key,
    /// conditional removal or due sync); returns whether it did.
    mutating func endDrainIfIdle() -> Bool {
        guard head == queue.count, accessHead == accesses.count, damaged.isEmpty, removalsIfUnchanged.isEmpty,
            !syncDue
        else {
            return false
        }
        drainScheduled = false
        return true
    }

    /// Marks `batch` done: committed, or dropped with `error`.
    mutating func complete(_ batch: WriteBatch, error: CacheError?) {
        for write in batch.writes where newest[write.key]?.sequence == write.sequence {
            newest[write.key] = nil
            if !accessesAwaitingWrite.isEmpty, let waiting = accessesAwaitingWrite.removeValue(forKey: write.key) {
                accesses.append((write.key, waiting))
                accessesQueued &+= 1
            }
        }
        queuedBytes -= batch.byteCount
        guard let first = batch.writes.first, let last = batch.writes.last else { return }
        committedThrough = max(committedThrough, last.sequence)
        if let error {
            if !synchronousWaiters.isEmpty {
                for sequence in synchronousWaiters.keys where first.sequence <= sequence && sequence <= last.sequence {
                    synchronousWaiters[sequence] = error
                }
            }
            if unreportedFailure == nil { unreportedFailure = error }
        }
    }

    /// Returns and clears the failure `flush()` must report.
    mutating func takeUnreportedFailure() -> CacheError? {
        defer { unreportedFailure = nil }
        return unreportedFailure
    }
}
