/// Runs one load per key at a time and hands its result to every caller waiting for that key.
///
/// The load runs in a task of its own, so a waiter's cancellation ends only that waiter's wait
/// (it gets `CancellationError`); the load goes on for the others. Results are not kept: once a
/// load finishes, the next caller starts a new one (the cache, not this type, remembers values).
final class LoadCoalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    private struct State {
        var nextWaiter: UInt64 = 0
        var flights: [Key: [UInt64: Waiter]] = [:]
    }

    private let state = Locked(State())

    /// The result of `run` for `key`, run now unless a run for `key` is already under way.
    func value(forKey key: Key, run: @escaping @Sendable () async -> Result<Value, any Error>) async throws -> Value {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: Waiter) in
                // Checked under the lock the cancellation handler also takes, so a cancellation
                // either finds the waiter registered or is seen here.
                let outcome = state.withLock { state -> (start: Bool, cancelled: Bool) in
                    if Task.isCancelled { return (false, true) }
                    if state.flights[key] != nil {
                        state.flights[key]![id] = waiter
                        return (false, false)
                    }
                    state.flights[key] = [id: waiter]
                    return (true, false)
                }
                if outcome.cancelled {
                    waiter.resume(throwing: CancellationError())
                } else if outcome.start {
                    Task { self.finish(key, with: await run()) }
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.flights[key]?.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Callers waiting for `key`'s load (tests wait for them to gather).
    func waiterCount(forKey key: Key) -> Int {
        state.withLock { $0.flights[key]?.count ?? 0 }
    }

    private func finish(_ key: Key, with result: Result<Value, any Error>) {
        let waiters = state.withLock { $0.flights.removeValue(forKey: key) } ?? [:]
        for waiter in waiters.values { waiter.resume(with: result) }
    }
}
