import Synchronization

/// Runs one load per key at a time and hands its result to every caller waiting for that key.
///
/// The load runs in a task of its own, so a waiter's cancellation ends only that waiter's wait
/// (it gets `CancellationError`); the load goes on for the others. Results are not kept: once a
/// load finishes, the next caller starts a new one (the cache, not this type, remembers values).
final class LoadCoalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value, any Error>

    /// One run under way for a key.
    private struct Flight {
        var waiters: [UInt64: Waiter] = [:]
        /// Waiters registered by ``join(forKey:run:)``.
        var promises: [LoadPromise<Result<Value, any Error>>] = []
        /// Set when the key was written or removed after the run started: its result is older
        /// than what the cache holds, and must not be stored (see ``supersede(_:)``).
        var isSuperseded = false
    }

    private struct State {
        var nextWaiter: UInt64 = 0
        var flights: [Key: Flight] = [:]
    }

    private let state = Locked(State())
    /// `state.flights.count`, readable without the lock: a write checks it on every call.
    private let flightCount = Atomic<Int>(0)

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
                        state.flights[key]!.waiters[id] = waiter
                        return (false, false)
                    }
                    state.flights[key] = Flight(waiters: [id: waiter])
                    flightCount.add(1, ordering: .sequentiallyConsistent)
                    return (true, false)
                }
                if outcome.cancelled {
                    waiter.resume(throwing: CancellationError())
                } else if outcome.start {
                    Task { self.finish(key, with: await run()) }
                }
            }
        } onCancel: {
            let waiter = state.withLock { $0.flights[key]?.waiters.removeValue(forKey: id) }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Starts `run` for `key` with no one waiting (a background refresh), unless a run for `key`
    /// is already under way; callers that come for `key` meanwhile join it. True when it started.
    @discardableResult
    func start(forKey key: Key, run: @escaping @Sendable () async -> Result<Value, any Error>) -> Bool {
        let start = state.withLock { state in
            guard state.flights[key] == nil else { return false }
            state.flights[key] = Flight()
            flightCount.add(1, ordering: .sequentiallyConsistent)
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
                state.flights[key] = Flight()
                flightCount.add(1, ordering: .sequentiallyConsistent)
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

    /// Joins the run under way for `key`, or starts `run` for it, and returns the promise of its
    /// result: registered before this returns, so a run that ends at once is not missed (and
    /// never run twice for one caller). A waiter that stops waiting on the promise leaves the
    /// run going.
    func join(
        forKey key: Key, run: @escaping @Sendable () async -> Result<Value, any Error>
    ) -> LoadPromise<Result<Value, any Error>> {
        let promise = LoadPromise<Result<Value, any Error>>()
        let start = state.withLock { state in
            if state.flights[key] != nil {
                state.flights[key]!.promises.append(promise)
                return false
            }
            state.flights[key] = Flight(promises: [promise])
            flightCount.add(1, ordering: .sequentiallyConsistent)
            return true
        }
        if start { Task { self.finish(key, with: await run()) } }
        return promise
    }

    /// True while a run for `key` is under way.
    func isLoading(_ key: Key) -> Bool {
        state.withLock { $0.flights[key] != nil }
    }

    /// Marks the run under way for `key`, if any, as superseded: the key was written or removed
    /// since it started. The cache calls it under the key's write lock after each write, and a
    /// run checks ``isSuperseded(_:)`` under the same lock before it stores, so a run that
    /// started before a write never stores over it. Costs one atomic load when nothing runs.
    func supersede(_ key: Key) {
        guard flightCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        state.withLock { state in
            if state.flights[key] != nil { state.flights[key]!.isSuperseded = true }
        }
    }

    /// ``supersede(_:)`` for every run under way (a removal of everything).
    func supersedeAll() {
        guard flightCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        state.withLock { state in
            for key in state.flights.keys { state.flights[key]!.isSuperseded = true }
        }
    }

    /// True when the run under way for `key` was superseded.
    func isSuperseded(_ key: Key) -> Bool {
        state.withLock { $0.flights[key]?.isSuperseded ?? false }
    }

    /// Callers waiting for `key`'s load (tests wait for them to gather); a caller that joined
    /// with ``join(forKey:run:)`` counts until the run ends, even if it stopped waiting.
    func waiterCount(forKey key: Key) -> Int {
        state.withLock { state in
            guard let flight = state.flights[key] else { return 0 }
            return flight.waiters.count + flight.promises.count
        }
    }

    private func finish(_ key: Key, with result: Result<Value, any Error>) {
        let flight = state.withLock { state in
            let flight = state.flights.removeValue(forKey: key)
            if flight != nil { flightCount.subtract(1, ordering: .sequentiallyConsistent) }
            return flight
        }
        for waiter in flight?.waiters.values ?? [:].values { waiter.resume(with: result) }
        for promise in flight?.promises ?? [] { promise.fulfill(result) }
    }
}
