import Synchronization

/// The time one get-or-load may spend waiting on the remote tier's replies, whatever the sequence
/// of calls inside it (a lookup, the lease, a second lookup, the polls while another machine
/// loads): each exchange is given what remains, and is not made once nothing does. Time spent
/// between exchanges (the pauses while another machine holds the lease) is not charged: that
/// wait is bounded by ``LoadLease/waitFor``.
package final class RemoteBudget: Sendable {
    private let remaining: Mutex<Duration>

    /// A budget of `total` (at most the longest timer, 100 years).
    package init(_ total: Duration) {
        remaining = Mutex(total.forTimer)
    }

    /// What remains; zero once spent.
    package var left: Duration { remaining.withLock { $0 } }

    /// Runs `exchange` with what remains as its timeout and charges the time it took; nil without
    /// running it when nothing remains.
    package func spend<T>(_ exchange: (Duration) async -> T) async -> T? {
        let available = left
        guard available > .zero else { return nil }
        let clock = ContinuousClock()
        let start = clock.now
        let result = await exchange(available)
        let spent = clock.now - start
        remaining.withLock { $0 = max(.zero, $0 - spent) }
        return result
    }
}
