#if Redis
import LMDBCache
import NIOConcurrencyHelpers

/// The changes other machines published on the namespace's channel, as the cache's
/// ``LMDBCache/ChangeFeed`` delivers them: the subscriber appends what arrives, the cache's
/// follower takes it in order.
///
/// A mark of missed changes (a lost subscription) does not discard what is held: the follower
/// takes ``LMDBCache/ChangeDelivery/missed`` first, then every change held, those received before
/// the mark and after it alike, so a removal heard then still reaches the disk tier.
///
/// Bounded: past ``limit`` changes waiting (a follower that cannot keep up), they are dropped and
/// the next delivery is ``LMDBCache/ChangeDelivery/missed``, as after a lost subscription: the
/// cache then drops its memory tier (and, with ``RedisConfiguration/MissedChanges/dropBothTiers``,
/// its disk tier).
final class RedisChangeFeed: ChangeFeed {
    private struct State {
        var changes: [CacheChange] = []
        var missed = false
    }

    /// Changes held at most before the feed counts them missed.
    let limit: Int
    private let state = NIOLockedValueBox(State())
    /// Messages that were not changes (malformed, from another program on the channel).
    let malformed = NIOLockedValueBox(0)

    /// This cache's origin: its own changes come back on the channel and are dropped here, so
    /// they neither wake the follower nor take room.
    let origin: UInt64

    init(origin: UInt64, limit: Int = 65_536) {
        self.origin = origin
        self.limit = limit
    }

    /// A message's payload, as the subscriber received it; false when it is not another cache's
    /// change (malformed, or this cache's own).
    @discardableResult
    func deliver(_ payload: [UInt8]) -> Bool {
        guard let change = payload.withUnsafeBytes({ CacheChange(encoded: $0) }) else {
            malformed.withLockedValue { $0 += 1 }
            return false
        }
        guard change.origin != origin else { return false }
        state.withLockedValue { state in
            if state.changes.count >= limit {
                state.changes.removeAll()
                state.missed = true
            } else {
                state.changes.append(change)
            }
        }
        return true
    }

    /// Has the follower drop `key` from this cache's tiers, as if another machine had changed it:
    /// this cache's own write of it lost to a newer one in Redis (or found a value there), so what
    /// it holds locally is not what the other machines serve.
    func dropLocally(_ key: [UInt8]) {
        let change = CacheChange(kind: .key, origin: origin &+ 1, time: CacheChange.wallClockNow(), subject: key)
        state.withLockedValue { state in
            if state.changes.count >= limit {
                state.changes.removeAll()
                state.missed = true
            } else {
                state.changes.append(change)
            }
        }
    }

    /// Changes may have been published while the subscription was lost.
    func markMissed() {
        state.withLockedValue { $0.missed = true }
    }

    func publish(_ change: CacheChange) {}

    func receive() throws -> ChangeDelivery {
        state.withLockedValue { state in
            if state.missed {
                // The changes held stay for the next call, which the follower makes at once.
                state.missed = false
                return .missed
            }
            defer { state.changes.removeAll(keepingCapacity: true) }
            return .changes(state.changes)
        }
    }
}
#endif
