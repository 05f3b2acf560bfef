#if Redis
import NIOConcurrencyHelpers
import NIOCore

/// What the tier sends Redis in the background. Each change carries the version it was made at
/// (``RecordVersion``), so Redis keeps the newest whatever order writes land in: a retried or
/// late write cannot replace a newer one.
enum RedisWrite: Sendable, Equatable {
    /// Store a record until `keepUntil` (ms since 1970; 0: no end), indexed under `tags`; publish.
    /// With `absentSince` (a load's start, ms since 1970), only when the key holds no record and
    /// no removal since then (and then publish). `queuedAt`: when the cache queued it (ms since
    /// 1970; a load's value is versioned by its load's start, earlier).
    case set(
        key: [UInt8], record: [UInt8], keepUntil: UInt64, tags: [[UInt8]], absentSince: UInt64?,
        version: RecordVersion, queuedAt: UInt64)
    /// Remove a key, leaving a tombstone of `version`; publish.
    case remove(key: [UInt8], version: RecordVersion)
    /// Remove a damaged record read at `version` (a tombstone of it: a newer value stays);
    /// nothing to publish.
    case discard(key: [UInt8], version: RecordVersion)
    /// Remove every entry carrying a tag (stored bytes); publish.
    case removeTag([UInt8], version: RecordVersion)
    /// Remove every entry of the namespace; publish.
    case removeAll(version: RecordVersion)
    /// Release a load lease if its token is still this one's.
    case release(key: [UInt8], token: [UInt8])

    /// Whether it needs a reply before its commands can be built (a tag's members, a scan): sent
    /// on its own rather than in a pipeline with others.
    var needsLookup: Bool {
        switch self {
        case .removeTag, .removeAll: return true
        case .set, .remove, .discard, .release: return false
        }
    }

    /// The entry key whose value it changes, if one.
    var changedKey: [UInt8]? {
        switch self {
        case .set(let key, _, _, _, _, _, _), .remove(let key, _): return key
        case .discard, .removeTag, .removeAll, .release: return nil
        }
    }

    /// Bytes it sends, about: what bounds a pipeline.
    var size: Int {
        switch self {
        case .set(let key, let record, _, let tags, _, _, _):
            return tags.reduce(record.count + 2 * key.count + 128) { $0 + $1.count + key.count + 64 }
        case .remove(let key, _), .discard(let key, _), .release(let key, _): return key.count + 128
        case .removeTag(let tag, _): return tag.count + 128
        case .removeAll: return 128
        }
    }
}

/// A bounded FIFO of ``RedisWrite``s with one consumer that waits for them.
///
/// Past ``limit`` the oldest waiting write of a key is dropped and counted: a Redis that stays down
/// must not grow the process without bound. The key is not forgotten: until a tombstone of the
/// dropped write's version lands in Redis (the consumer sends one as soon as there is room), the
/// key counts as changed here and unsent (``mayHideUnsentChange(forKey:)``), so this cache never
/// reads back the value its own change replaced, and the other machines are told of the removal.
/// Tag removals and removals of everything are never dropped for room.
final class RedisWriteQueue: Sendable {
    private struct State {
        var writes = CircularBuffer<RedisWrite>()
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
        var dropped = 0
        /// Keys with a write or removal queued or being sent, and how many.
        var unsentKeys: [[UInt8]: Int] = [:]
        /// Keys whose write was dropped for room, and the newest such write's version: a tombstone
        /// of it is owed to Redis.
        var owedTombstones: [[UInt8]: RecordVersion] = [:]
        /// Tag removals and removals of everything queued or being sent.
        var unsentBroadRemovals = 0
        /// Writes queued or being sent, of every kind.
        var unsent = 0

        /// Counts `write` as unsent (`by` 1) or no longer (`by` -1).
        mutating func track(_ write: RedisWrite, by delta: Int) {
            switch write {
            case .set(let key, _, _, _, _, _, _), .remove(let key, _):
                let count = unsentKeys[key, default: 0] + delta
                unsentKeys[key] = count > 0 ? count : nil
            case .removeTag, .removeAll:
                unsentBroadRemovals = max(0, unsentBroadRemovals + delta)
            case .discard, .release:
                break
            }
        }

        /// Before a removal of everything is queued: the removals of everything queued before it
        /// (not yet taken by the consumer) are superseded by it, as its fence and tombstones, newer
        /// than theirs, do all they would; they go unsent (not counted as dropped: nothing is
        /// lost). In a cluster one fences each of the 16,384 slots (seconds on a busy machine),
        /// and while one waits every lookup skips Redis: a backlog of them would keep a machine
        /// from reading Redis at all. Other writes stay: should the new removal be dropped (refused
        /// for good, or the cache closing), theirs must still land.
        mutating func supersedeQueued() {
            var kept = CircularBuffer<RedisWrite>()
            for queued in writes {
                if case .removeAll = queued {
                    track(queued, by: -1)
                    unsent -= 1
                } else {
                    kept.append(queued)
                }
            }
            writes = kept
        }

        /// Drops the oldest write that may be dropped, owing its key a tombstone.
        mutating func dropOldest() -> RedisWrite {
            let index = writes.firstIndex { !$0.needsLookup } ?? writes.startIndex
            let write = writes.remove(at: index)
            track(write, by: -1)
            unsent -= 1
            dropped += 1
            if let key = write.changedKey, let version = write.version {
                owedTombstones[key] = max(owedTombstones[key] ?? version, version)
            }
            return write
        }

        /// Up to `count` writes, oldest first, then owed tombstones; nil when there are none.
        mutating func take(upTo count: Int) -> [RedisWrite]? {
            guard !writes.isEmpty || !owedTombstones.isEmpty else { return nil }
            var batch: [RedisWrite] = []
            batch.reserveCapacity(min(count, writes.count + owedTombstones.count))
            // Owed tombstones first: small, older than anything queued, and a Redis that keeps the
            // queue full must not starve them.
            for (key, version) in owedTombstones.prefix(count) {
                let tombstone = RedisWrite.remove(key: key, version: version)
                track(tombstone, by: 1)
                unsent += 1
                batch.append(tombstone)
            }
            for write in batch { if let key = write.changedKey { owedTombstones[key] = nil } }
            while batch.count < count, let write = writes.popFirst() { batch.append(write) }
            return batch
        }
    }

    let limit: Int
    private let state = NIOLockedValueBox(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Queues `write`, dropping the oldest past the limit, which is returned (its key is owed a
    /// tombstone). After ``close()`` `write` is dropped.
    @discardableResult
    func push(_ write: RedisWrite) -> RedisWrite? {
        let (waiter, dropped) = state.withLockedValue { state -> (CheckedContinuation<Void, Never>?, RedisWrite?) in
            guard !state.closed else {
                state.dropped += 1
                return (nil, nil)
            }
            if case .removeAll = write { state.supersedeQueued() }
            state.writes.append(write)
            state.track(write, by: 1)
            state.unsent += 1
            let dropped = state.writes.count > limit ? state.dropOldest() : nil
            defer { state.waiter = nil }
            return (state.waiter, dropped)
        }
        waiter?.resume()
        return dropped
    }

    /// Up to `count` writes, oldest first, waiting until there is one; nil once closed and empty.
    func next(upTo count: Int) async -> [RedisWrite]? {
        while true {
            let taken = state.withLockedValue { state -> [RedisWrite]?? in
                if let batch = state.take(upTo: count) { return .some(batch) }
                return state.closed ? .some(nil) : .none
            }
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLockedValue { state -> Bool in
                    if !state.writes.isEmpty || !state.owedTombstones.isEmpty || state.closed { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// Up to `count` writes, oldest first, without waiting (none when there are none).
    func take(upTo count: Int) -> [RedisWrite] {
        state.withLockedValue { $0.take(upTo: count) ?? [] }
    }

    /// The consumer is done with `writes` (landed, or given up on): they no longer hide Redis's
    /// values from lookups (``mayHideUnsentChange(forKey:)``).
    func finished(_ writes: [RedisWrite]) {
        state.withLockedValue { state in
            for write in writes { state.track(write, by: -1) }
            state.unsent = max(0, state.unsent - writes.count)
        }
    }

    /// Whether a change this cache made to `key` may not have reached Redis yet: a write or
    /// removal of the key is queued, being sent or retried, or owed as a tombstone, or a tag removal
    /// or removal of everything is. Redis's value for `key` may then be one this cache already
    /// replaced or removed, and must not be read back.
    func mayHideUnsentChange(forKey key: [UInt8]) -> Bool {
        state.withLockedValue {
            $0.unsentBroadRemovals > 0 || $0.unsentKeys[key] != nil || $0.owedTombstones[key] != nil
        }
    }

    /// The consumer gives up on `write` (no room to keep retrying it) without letting go of its
    /// key: a tombstone of its version is owed, and the key hides Redis's value until it lands.
    /// Anything else given up this way is simply finished.
    func giveUp(_ write: RedisWrite) {
        state.withLockedValue { state in
            state.track(write, by: -1)
            state.unsent = max(0, state.unsent - 1)
            state.dropped += 1
            if let key = write.changedKey, let version = write.version {
                state.owedTombstones[key] = max(state.owedTombstones[key] ?? version, version)
            }
        }
    }

    /// Counts writes the consumer gave up on.
    func countDropped(_ count: Int) {
        state.withLockedValue { $0.dropped += count }
    }

    /// No more writes: the consumer drains what is queued and ends.
    func close() {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            state.closed = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    var isClosed: Bool { state.withLockedValue { $0.closed } }
    /// Writes dropped so far.
    var dropped: Int { state.withLockedValue { $0.dropped } }
    /// Writes waiting.
    var count: Int { state.withLockedValue { $0.writes.count } }
    /// Writes queued, being sent or retried, and tombstones owed.
    var unsent: Int { state.withLockedValue { $0.unsent + $0.owedTombstones.count } }
}

extension RedisWrite {
    /// The version it was made at, for the kinds that carry one.
    var version: RecordVersion? {
        switch self {
        case .set(_, _, _, _, _, let version, _), .remove(_, let version), .removeTag(_, let version),
            .removeAll(let version):
            return version
        case .discard, .release: return nil
        }
    }
}
#endif
