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

    /// Starts `run` for `key` with no one waiting (a background refresh), unless a run for `key`
    /// is already under way; callers that come for `key` meanwhile join it. True when it started.
    @discardableResult
    func start(forKey key: Key, run: @escaping @Sendable () async -> Result<Value, any Error>) -> Bool {
        let start = state.withLock { state in
            guard state.flights[key] == nil else { return false }
            state.flights[key] = [:]
            return true
        }
        if start { Task { self.finish(key, with: await run()) } }
        return start
    }

    /// Starts one run of `run` for those of `keys` no run is under way for (the keys it claims),
    /// in a task of its own: callers that come for a claimed key meanwhile join it, and each
    /// claimed key's waiters get that key's result (a key `run` leaves out: the failure given).
    /// Returns the claimed keys and the promise of the run's results; nil when it claims none.
    func startBulk(
        forKeys keys: [Key], missing: @escaping @Sendable (Key) -> any Error,
        run: @escaping @Sendable ([Key]) async -> [Key: Result<Value, any Error>]
    ) -> (claimed: [Key], results: LoadPromise<[Key: Result<Value, any Error>]>)? {
        let claimed = state.withLock { state in
            keys.filter { key in
                guard state.flights[key] == nil else { return false }
                state.flights[key] = [:]
                return true
            }
        }
        guard !claimed.isEmpty else { return nil }
        let promise = LoadPromise<[Key: Result<Value, any Error>]>()
        Task {
            let results = await run(claimed)
            for key in claimed { finish(key, with: results[key] ?? .failure(missing(key))) }
            promise.fulfill(results)
        }
        return (claimed, promise)
    }

    /// True while a run for `key` is under way.
    func isLoading(_ key: Key) -> Bool {
        state.withLock { $0.flights[key] != nil }
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
