#if Redis
import Synchronization

/// A one-way gate that opens when the subscriber's first subscription is confirmed, for lookups
/// to wait on: a value read from Redis before this cache can hear of changes could be replaced
/// unannounced (the change published before the subscription) and served until it expires.
///
/// Once open it stays open: after a lost subscription the next one reports that changes may have
/// been missed (``RedisSubscriber``'s `onSubscribed(true)`), and the cache drops its memory tier
/// (its disk tier too with `missedChanges: .dropBothTiers`).
final class SubscriptionGate: Sendable {
    private struct State {
        var isOpen = false
        var nextWaiter = 0
        var waiters: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waiters cancelled before they were registered (their registration then returns at once).
        var cancelledEarly: Set<Int> = []
    }

    private let state = Mutex(State())

    var isOpen: Bool { state.withLock { $0.isOpen } }

    /// Opens the gate and lets every waiter through.
    func open() {
        let waiters = state.withLock { state in
            state.isOpen = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Whether the gate is open by `deadline`: waits for it until then, or until the caller is
    /// cancelled.
    func wait(until deadline: ContinuousClock.Instant) async -> Bool {
        if isOpen { return true }
        _ = try? await raceAgainstDeadline(deadline) { await self.waitOpen() }
        return isOpen
    }

    /// Returns once the gate is open, or at once when the task is cancelled.
    private func waitOpen() async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = state.withLock { state in
                    if state.isOpen || state.cancelledEarly.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                // Not registered yet (an open gate resumed it already, or will let it through).
                if !state.isOpen { state.cancelledEarly.insert(id) }
                return nil
            }
            waiter?.resume()
        }
    }
}
#endif
