#if Redis
import LMDBCache
import NIOConcurrencyHelpers

/// The changes other machines published on the namespace's channel, as the cache's
/// ``LMDBCache/ChangeFeed`` delivers them: the subscriber appends what arrives, the cache's
/// follower takes it in order.
///
/// Bounded: past ``limit`` changes waiting (a follower that cannot keep up), they are dropped and
/// the next delivery is ``LMDBCache/ChangeDelivery/missed``, as after a lost subscription: the
/// cache then drops its memory tier.
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
            guard !state.missed else { return }
            if state.changes.count >= limit {
                state.changes.removeAll()
                state.missed = true
            } else {
                state.changes.append(change)
            }
        }
        return true
    }

    /// Changes may have been published while the subscription was lost.
    func markMissed() {
        state.withLockedValue { state in
            state.changes.removeAll()
            state.missed = true
        }
    }

    func publish(_ change: CacheChange) {}

    func receive() throws -> ChangeDelivery {
        state.withLockedValue { state in
            if state.missed {
                state.missed = false
                return .missed
            }
            defer { state.changes.removeAll(keepingCapacity: true) }
            return .changes(state.changes)
        }
    }
}
#endif
