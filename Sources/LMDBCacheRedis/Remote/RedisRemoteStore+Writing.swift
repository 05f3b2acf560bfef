#if Redis
import LMDBCache
import RESP

/// A write the writer has not landed yet.
struct PendingWrite: Sendable {
    /// What is sent: the cache's write, or the tombstone that replaced it.
    var write: RedisWrite
    /// The write as the cache queued it (what the queue is told is finished).
    let queued: RedisWrite
    /// When it first failed; nil until it has.
    var firstFailure: ContinuousClock.Instant?
    /// Failed attempts so far (the backoff's exponent).
    var attempts = 0
    /// Not sent again before this.
    var retryAt: ContinuousClock.Instant

    init(_ write: RedisWrite, now: ContinuousClock.Instant) {
        self.write = write
        queued = write
        retryAt = now
    }
}

/// How one write of a pipeline ended.
enum WriteOutcome {
    /// In Redis; whether a change was published.
    case landed(published: Bool)
    /// Answered, and not stored: Redis holds a newer write of the key (or, for a load's
    /// set-if-absent, a value). This cache's own copy is then not the fleet's: dropped here.
    case superseded
    /// Not sent: a removal of one of its tags made after it fenced it out (``RedisScripts/tag``).
    /// Its key must end removed, as the removal would have left it had the value landed first:
    /// the value is replaced by its version's tombstone (a load's value is just dropped).
    case fenced
    /// Redis answered with an error: nothing written, nothing published.
    case refused(RedisWriteRefusal)
    /// No answer (timeout, connection lost): it may or may not have run.
    case failed(any Error)
    /// Not tried: the circuit is open.
    case notTried
}

extension RedisRemoteStore {
    /// Sends the queue's writes until it is closed and empty. New writes go in pipelines (bounded
    /// by count and bytes); a write that fails is retried on its own with backoff, beside the new
    /// ones, so one write Redis cannot take holds up no other. A tag removal or removal of
    /// everything runs on its own, one at a time, beside the other writes: in a cluster it fences
    /// every hash slot first (seconds), and the writes queued behind it must not wait that long
    /// (past ``RedisConfiguration/writeRetryLimit`` they would be dropped). That is safe because
    /// every write is versioned: the removal's fence refuses an older write that arrives after it,
    /// and its tombstones leave a newer write alone, whichever lands first. Loads' values wait
    /// for it (``BroadRemovals``). While the circuit refuses calls, new writes wait in the queue.
    func writeLoop() async {
        let clock = ContinuousClock()
        var pending: [PendingWrite] = []
        var broad = BroadRemovals()
        while true {
            pending += advance(&broad, retrying: pending)
            var fresh: [RedisWrite]
            if pending.isEmpty && broad.isIdle {
                guard let batch = await queue.next(upTo: Self.pipelineLimit) else { return }
                fresh = batch
            } else {
                let now = clock.now
                if breaker.refusesCalls && !queue.isClosed {
                    // Redis is failing: new writes stay in the queue (bounded; a write dropped
                    // there owes its key's tombstone) until the circuit lets a probe through, and
                    // while the probe (perhaps a broad removal's) is under way.
                    let retryAt = breaker.retryAt
                    try? await clock.sleep(until: retryAt > now ? min(retryAt, now + .milliseconds(50)) : now + .milliseconds(50))
                    continue
                }
                fresh = queue.take(upTo: Self.pipelineLimit)
                let soonest = pending.lazy.map(\.retryAt).min()
                if fresh.isEmpty, soonest.map({ $0 > now }) ?? true {
                    // A short nap at most: writes queued meanwhile, and the end of a broad
                    // removal, are not waited for long.
                    try? await clock.sleep(until: min(soonest ?? now + .milliseconds(20), now + .milliseconds(20)))
                    continue
                }
            }
            let now = clock.now
            let due = pending.filter { $0.retryAt <= now }
            pending.removeAll { $0.retryAt <= now }
            for item in due {
                guard let item = admitted(item) else { continue }
                if item.write.needsLookup {
                    lineUp(item, in: &broad)
                } else if broad.holds(item, retrying: pending) {
                    hold(item, in: &broad)
                } else {
                    await attempt([item], into: &pending)
                }
            }
            var segment: [PendingWrite] = []
            var segmentBytes = 0
            for write in fresh {
                guard let item = admitted(PendingWrite(write, now: now)) else { continue }
                if item.write.needsLookup || segment.count == Self.pipelineLimit
                    || (!segment.isEmpty && segmentBytes + item.write.size > Self.pipelineBytes)
                {
                    // The writes queued before a broad removal are sent before it starts.
                    if !segment.isEmpty { await attempt(segment, into: &pending) }
                    segment = []
                    segmentBytes = 0
                }
                if item.write.needsLookup {
                    lineUp(item, in: &broad)
                } else if broad.holds(item, retrying: pending) {
                    hold(item, in: &broad)
                } else {
                    segment.append(item)
                    segmentBytes += item.write.size
                }
            }
            if !segment.isEmpty { await attempt(segment, into: &pending) }
        }
    }

    /// `item` as it may be sent now; nil when it is abandoned. A value made longer ago than
    /// ``RedisConfiguration/writeRetryLimit`` (by its version's wall clock, or for a load's value,
    /// versioned by its load's start, by when it was queued: time queued, refused or waiting for
    /// the circuit all count) is never stored, since a removal made meanwhile may
    /// have left a tombstone that is gone by now: it is replaced by its version's tombstone (a
    /// load's value is abandoned: it replaced nothing). So is a record larger than
    /// ``RedisConfiguration/maximumRecordSize`` (counted as refused). Both count as dropped.
    private func admitted(_ item: PendingWrite) -> PendingWrite? {
        guard case .set(_, let record, _, _, _, let version, let queuedAt) = item.write else { return item }
        let overdue =
            max(version.milliseconds, queuedAt).addingReportingOverflow(writeRetryLimit.milliseconds).partialValue
            < CacheChange.wallClockNow()
        if overdue { return replacedByTombstone(item) }
        guard record.count + RedisEnvelope.headerCount > maximumRecordSize else { return item }
        count { $0.writesRefused += 1 }
        metrics.writesRefused.increment()
        logger.warning(
            "LMDBCache did not send a record larger than the Redis tier's maximumRecordSize; its key is removed there",
            metadata: ["bytes": "\(record.count)", "maximumRecordSize": "\(maximumRecordSize)"])
        return replacedByTombstone(item)
    }

    /// `item`, a value that will not be stored, as its version's tombstone (counted as dropped),
    /// which makes its key safe; nil for a load's value, which replaced nothing and is just
    /// dropped.
    ///
    /// The value is dropped from this cache's own tiers too: the other machines, told of the
    /// removal, load the key, and so does this one (until the tombstone lands, its lookups of the
    /// key skip Redis: ``RedisWriteQueue/mayHideUnsentChange(forKey:)``).
    private func replacedByTombstone(_ item: PendingWrite, outOfMemory: Bool = false) -> PendingWrite? {
        guard case .set(let key, _, _, _, .none, let version, _) = item.write else {
            // A load's value: it replaced nothing, but Redis may hold another value (the reason
            // a load's write is a set-if-absent; the load may have skipped Redis, as lookups do
            // while a change of this cache's is unsent), which the other machines serve. Kept
            // when refused for want of memory: Redis then stores nothing, every machine loads and
            // keeps its own, and dropping it would cost a load per get until the spell ends.
            drop(item)
            if !outOfMemory { dropOwnCopy(of: item.write) }
            return nil
        }
        queue.countDropped(1)
        dropOwnCopy(of: item.write)
        var replaced = item
        replaced.write = .remove(key: key, version: version)
        return replaced
    }

    /// Sends `items` under the breaker (one exchange, or two when values carry tags: their tag
    /// scripts first) and settles each: landed, or back in
    /// `pending` with its backoff, or dropped.
    func attempt(_ items: [PendingWrite], into pending: inout [PendingWrite]) async {
        let admission = breaker.admit()
        var outcomes: [WriteOutcome]
        if admission.allowed {
            outcomes = await perform(items.map(\.write))
            // A refusal counts against the circuit (so a Redis refusing everything is asked once
            // per open period, not once per write), except `-OOM`: Redis still serves the
            // lookups an open circuit would skip, and the refused value's tombstone, allowed,
            // follows at once.
            var failure: (any Error)?
            for outcome in outcomes {
                if case .failed(let error) = outcome { failure = error }
                if case .refused(let refusal) = outcome, !refusal.isOutOfMemory, failure == nil { failure = refusal }
            }
            if let failure { breaker.failed(admission, failure) } else { breaker.succeeded(admission) }
        } else {
            outcomes = Array(repeating: .notTried, count: items.count)
        }
        let now = ContinuousClock.now
        for (item, outcome) in zip(items, outcomes) {
            switch outcome {
            case .landed(let published):
                count {
                    $0.writes += 1
                    if published { $0.changesPublished += 1 }
                }
                metrics.writesSent.increment()
                queue.finished([item.queued])
                inRefusalEpisode.withLockedValue { $0 = false }
            case .superseded:
                count { $0.writes += 1 }
                metrics.writesSent.increment()
                queue.finished([item.queued])
                inRefusalEpisode.withLockedValue { $0 = false }
                if let key = item.write.changedKey {
                    changeFeed.dropLocally(key)
                    wakeFollower()
                }
            case .fenced:
                if var replaced = replacedByTombstone(item) {
                    replaced.attempts = 0
                    replaced.firstFailure = nil
                    replaced.retryAt = now
                    pending.append(replaced)
                } else if let key = item.write.changedKey {
                    // A load's value, just dropped: not kept here either (a replaced one was).
                    changeFeed.dropLocally(key)
                    wakeFollower()
                }
            case .refused(let refusal):
                count {
                    $0.writesRefused += 1
                    $0.failures += 1
                }
                metrics.writesRefused.increment()
                let first = inRefusalEpisode.withLockedValue { episode in
                    defer { episode = true }
                    return !episode
                }
                if first {
                    logger.warning(
                        "LMDBCache's writes are refused by Redis; retried with backoff, changes not published meanwhile",
                        metadata: ["error": "\(refusal.message)"])
                } else {
                    logger.debug("Redis refused a write", metadata: ["error": "\(refusal.message)"])
                }
                retry(item, now: now, transient: refusal.isTransient, outOfMemory: refusal.isOutOfMemory, into: &pending)
            case .failed(let error):
                count { $0.failures += 1 }
                metrics.writesFailed.increment()
                logger.debug("LMDBCache could not send a write to Redis", metadata: ["error": "\(error)"])
                retry(item, now: now, transient: true, outOfMemory: false, into: &pending)
            case .notTried:
                if queue.isClosed { drop(item) } else {
                    var later = item
                    later.retryAt = max(breaker.retryAt, now + .milliseconds(10))
                    pending.append(later)
                }
            }
        }
        // Bounded as the queue is: past its limit the oldest retried write that may go goes, its
        // key owed a tombstone (tag removals and removals of everything are kept).
        while pending.count > queue.limit, let index = pending.firstIndex(where: { !$0.write.needsLookup }) {
            let item = pending.remove(at: index)
            queue.giveUp(item.queued)
            dropOwnCopy(of: item.write)
        }
    }

    /// Puts a failed write back in `pending` with its backoff, or drops it: the cache is closing,
    /// or it was refused for good; a value refused for good, for want of memory or failing past
    /// ``RedisConfiguration/writeRetryLimit`` is replaced by the tombstone of its version, retried
    /// until it lands (a load's value is just dropped: it replaced nothing).
    private func retry(
        _ item: PendingWrite, now: ContinuousClock.Instant, transient: Bool, outOfMemory: Bool,
        into pending: inout [PendingWrite]
    ) {
        guard !queue.isClosed else { return drop(item) }
        var next = item
        let firstFailure = item.firstFailure ?? now
        next.firstFailure = firstFailure
        next.attempts += 1
        let overdue = now - firstFailure >= writeRetryLimit
        switch item.write {
        case .set where outOfMemory || overdue || !transient:
            // A value that will not land (refused for good, for want of memory, or for too long):
            // its key is made safe by its version's tombstone, which may land where it did not.
            guard var replaced = replacedByTombstone(item, outOfMemory: outOfMemory && !overdue) else { return }
            replaced.attempts = 0
            replaced.firstFailure = nil
            replaced.retryAt = now
            pending.append(replaced)
            return
        case _ where !transient:
            // Refused for good (`WRONGTYPE`, `NOPERM`, `ERR`): it would be refused again.
            return drop(item)
        case .discard, .release:
            // Nothing depends on them landing late: a lease expires by itself.
            if overdue { return drop(item) }
        case .set, .remove, .removeTag, .removeAll:
            break
        }
        // 50 ms, doubling to 2 s.
        let backoff = Duration.milliseconds(50 << min(next.attempts - 1, 5))
        next.retryAt = max(now + min(backoff, .seconds(2)), breaker.retryAt)
        pending.append(next)
    }

    /// After `write`, a value of this cache's, is given up (replaced by its tombstone, or, a load's
    /// value, just dropped): the value is dropped from this cache's own tiers too, as the other
    /// machines drop it on hearing of the removal, or never had it (a load's value given up would
    /// otherwise stay here beside another value in Redis, which the others serve, until it
    /// expires). A newer value stored here meanwhile goes with it: one load more, and its own
    /// write, still queued, lands after and wins there.
    func dropOwnCopy(of write: RedisWrite) {
        guard case .set(let key, _, _, _, _, _, _) = write else { return }
        changeFeed.dropLocally(key)
        wakeFollower()
    }

    func drop(_ item: PendingWrite) {
        queue.countDropped(1)
        queue.finished([item.queued])
    }
}
#endif
