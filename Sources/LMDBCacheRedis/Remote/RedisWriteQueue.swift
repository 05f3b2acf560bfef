#if Redis
import NIOConcurrencyHelpers
import NIOCore

/// What the tier sends Redis in the background, in the order the cache made the changes (one key's
/// writes and removals are queued under that key's lock, and one task sends them in order on
/// pipelines, so Redis applies them in that order).
enum RedisWrite: Sendable, Equatable {
    /// Store a record until `keepUntil` (ms since 1970; 0: no end), indexed under `tags`; publish.
    /// With `onlyIfAbsent`, only when the key holds no record (and then publish).
    case set(key: [UInt8], record: [UInt8], keepUntil: UInt64, tags: [[UInt8]], onlyIfAbsent: Bool)
    /// Remove a key; publish.
    case remove(key: [UInt8])
    /// Remove a damaged record; nothing to publish.
    case discard(key: [UInt8])
    /// Remove every entry carrying a tag (stored bytes); publish.
    case removeTag([UInt8])
    /// Remove every entry of the namespace; publish.
    case removeAll
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
}

/// A bounded FIFO of ``RedisWrite``s with one consumer that waits for them.
///
/// Past ``limit`` the oldest waiting write is dropped and counted: a Redis that stays down must not
/// grow the process without bound. What is dropped is lost for the other machines (they see the
/// change once their own entries expire); the count says how often.
final class RedisWriteQueue: Sendable {
    private struct State {
        var writes = CircularBuffer<RedisWrite>()
        var waiter: CheckedContinuation<Void, Never>?
        var closed = false
        var dropped = 0
        /// Keys with a write or removal queued or being sent, and how many.
        var unsentKeys: [[UInt8]: Int] = [:]
        /// Tag removals and removals of everything queued or being sent.
        var unsentBroadRemovals = 0
        /// Writes queued or being sent, of every kind.
        var unsent = 0

        /// Counts `write` as unsent (`by` 1) or no longer (`by` -1).
        mutating func track(_ write: RedisWrite, by delta: Int) {
            switch write {
            case .set(let key, _, _, _, _), .remove(let key):
                let count = unsentKeys[key, default: 0] + delta
                unsentKeys[key] = count > 0 ? count : nil
            case .removeTag, .removeAll:
                unsentBroadRemovals = max(0, unsentBroadRemovals + delta)
            case .discard, .release:
                break
            }
        }
    }

    let limit: Int
    private let state = NIOLockedValueBox(State())

    init(limit: Int) {
        self.limit = max(1, limit)
    }

    /// Queues `write` (dropping the oldest past the limit). After ``close()`` it is dropped.
    func push(_ write: RedisWrite) {
        let waiter = state.withLockedValue { state -> CheckedContinuation<Void, Never>? in
            guard !state.closed else {
                state.dropped += 1
                return nil
            }
            state.writes.append(write)
            state.track(write, by: 1)
            state.unsent += 1
            if state.writes.count > limit {
                state.track(state.writes.removeFirst(), by: -1)
                state.unsent -= 1
                state.dropped += 1
            }
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Up to `count` writes, oldest first, waiting until there is one; nil once closed and empty.
    func next(upTo count: Int) async -> [RedisWrite]? {
        while true {
            let taken = state.withLockedValue { state -> [RedisWrite]?? in
                if !state.writes.isEmpty {
                    var batch: [RedisWrite] = []
                    batch.reserveCapacity(min(count, state.writes.count))
                    while batch.count < count, let write = state.writes.popFirst() { batch.append(write) }
                    return .some(batch)
                }
                return state.closed ? .some(nil) : .none
            }
            if let taken { return taken }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let ready = state.withLockedValue { state -> Bool in
                    if !state.writes.isEmpty || state.closed { return true }
                    state.waiter = continuation
                    return false
                }
                if ready { continuation.resume() }
            }
        }
    }

    /// The consumer is done with `writes` (sent, or given up on): they no longer hide Redis's
    /// values from lookups (``mayHideUnsentChange(forKey:)``).
    func finished(_ writes: [RedisWrite]) {
        state.withLockedValue { state in
            for write in writes { state.track(write, by: -1) }
            state.unsent = max(0, state.unsent - writes.count)
        }
    }

    /// Whether a change this cache made to `key` may not have reached Redis yet: a write or
    /// removal of the key, or a tag removal or removal of everything, is queued or being sent.
    /// Redis's value for `key` may then be one this cache already replaced or removed, and must
    /// not be read back.
    func mayHideUnsentChange(forKey key: [UInt8]) -> Bool {
        state.withLockedValue { $0.unsentBroadRemovals > 0 || $0.unsentKeys[key] != nil }
    }

    /// Counts writes the consumer gave up on (the cache closed while Redis was unreachable).
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
    /// Writes queued or being sent.
    var unsent: Int { state.withLockedValue { $0.unsent } }
}
#endif
