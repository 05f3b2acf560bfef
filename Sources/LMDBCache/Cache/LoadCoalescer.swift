import LMDBCacheStorage
import Synchronization

/// Runs one load per key at a time and hands its result to every caller waiting for that key.
///
/// The load runs in a task of its own, so a waiter's cancellation ends only that waiter's wait
/// (it gets `CancellationError`); the load goes on for the others. Results are not kept: once a
/// load finishes, the next caller starts a new one (the cache, not this type, remembers values).
///
/// Each run is a flight with an identity, which `run` receives: the cache asks with it whether
/// the run's result may still be stored (``isSuperseded(_:flight:storing:)``). A removal or write
/// covering the key since the run began its work supersedes it (``supersede(_:)``,
/// ``supersede(taggedWith:)``, ``supersedeAll()``), and so does a newer run of the key that stored
/// its value first (``supersede(_:before:)``).
final class LoadCoalescer<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    typealias Outcome = Result<Value, any Error>
    /// A load's work: given its flight's identity, its result.
    typealias Run = @Sendable (_ flight: UInt64) async -> Outcome
    private typealias Waiter = CheckedContinuation<Value, any Error>

    /// Distinct tag removals a run remembers, at most, for the tags its value will carry; past
    /// that any tag on its value keeps it out of the cache (more distinct tags removed during one
    /// load than any workload this library knows of).
    static var rememberedTagRemovals: Int { 1_024 }

    /// One run under way for a key.
    private struct Flight {
        let id: UInt64
        /// When it started, on the cache's timeout clock.
        let started: Duration
        var waiters: [UInt64: Waiter] = [:]
        /// Waiters registered by ``join(forKey:replacingAfter:run:)`` and ``startBulk``: each
        /// leaves when it stops waiting (``leave(_:flight:promise:)``).
        var promises: [ObjectIdentifier: LoadPromise<Outcome>] = [:]
        /// Set when the key was written or removed after the run began: its result is older
        /// than what the cache holds, and must not be stored (see ``supersede(_:)``).
        var isSuperseded = false
        /// The tags of the key's entry when the run began its work (``noteStart(_:flight:tags:)``);
        /// nil before. A tag removal after it covering one of them supersedes the run.
        var tagsAtStart: [[UInt8]]?
        /// Tags removed since the run began that its key's entry did not carry: its value must
        /// not be stored carrying one of them.
        var removedTags: [[UInt8]] = []
        var removedTagsOverflowed = false

        init(id: UInt64, started: Duration) {
            self.id = id
            self.started = started
        }

        /// Notes a removal of `tag`, which covers the key when its entry carried it.
        mutating func removed(tag: [UInt8]) {
            guard let tagsAtStart, !isSuperseded else { return }  // began after it: unaffected
            if tagsAtStart.contains(tag) {
                isSuperseded = true
            } else if !removedTags.contains(tag) {
                if removedTags.count < LoadCoalescer.rememberedTagRemovals {
                    removedTags.append(tag)
                } else {
                    removedTagsOverflowed = true
                }
            }
        }

        func forbids(_ tags: EntryTags) -> Bool {
            if isSuperseded { return true }
            if tags.isEmpty { return false }
            return removedTagsOverflowed || tags.bytes.contains { removedTags.contains($0) }
        }
    }

    /// A replaced run's place: a bulk run has one identity for all its keys.
    private struct Replaced: Hashable {
        var key: Key
        var id: UInt64
    }

    private struct State {
        var nextID: UInt64 = 0
        var flights: [Key: Flight] = [:]
        /// Runs a newer run replaced after they hung past a caller's bound, kept until they end,
        /// for the callers that still wait on them: each stores its result unless a write, a
        /// removal or a newer run of its key came first.
        var replaced: [Replaced: Flight] = [:]

        mutating func newID() -> UInt64 {
            nextID += 1
            return nextID
        }

        /// Calls `body` on each replaced run of `key`.
        mutating func forEachReplaced(of key: Key, _ body: (inout Flight) -> Void) {
            guard !replaced.isEmpty else { return }
            for place in replaced.keys where place.key == key { body(&replaced[place]!) }
        }

        /// The run with identity `id`, current or replaced.
        subscript(key: Key, id: UInt64) -> Flight? {
            get { flights[key]?.id == id ? flights[key] : replaced[Replaced(key: key, id: id)] }
            set {
                if flights[key]?.id == id {
                    flights[key] = newValue
                } else {
                    replaced[Replaced(key: key, id: id)] = newValue
                }
            }
        }
    }

    private let state = Locked(State())
    /// Runs under way, replaced ones included (`state.flights.count + state.replaced.count`),
    /// readable without the lock: a write checks it on every call.
    private let flightCount = Atomic<Int>(0)
    /// The time on the cache's timeout clock, for a run's age.
    private let now: @Sendable () -> Duration

    init(now: @escaping @Sendable () -> Duration = { .zero }) {
        self.now = now
    }

    /// The result of `run` for `key`, run now unless a run for `key` is already under way.
    func value(forKey key: Key, run: @escaping Run) async throws -> Value {
        let id = state.withLock { $0.newID() }
        let started = now()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (waiter: Waiter) in
                // Checked under the lock the cancellation handler also takes, so a cancellation
                // either finds the waiter registered or is seen here.
                let outcome = state.withLock { state -> (flight: UInt64?, cancelled: Bool) in
                    if Task.isCancelled { return (nil, true) }
                    if state.flights[key] != nil {
                        state.flights[key]!.waiters[id] = waiter
                        return (nil, false)
                    }
                    var flight = Flight(id: state.newID(), started: started)
                    flight.waiters[id] = waiter
                    state.flights[key] = flight
                    flightCount.add(1, ordering: .sequentiallyConsistent)
                    return (flight.id, false)
                }
                if outcome.cancelled {
                    waiter.resume(throwing: CancellationError())
                } else if let flight = outcome.flight {
                    launch(key, flight, run)
                }
            }
        } onCancel: {
            let waiter = state.withLock { state -> Waiter? in
                if let current = state.flights[key], current.waiters[id] != nil {
                    return state.flights[key]!.waiters.removeValue(forKey: id)
                }
                for (place, run) in state.replaced where place.key == key && run.waiters[id] != nil {
                    return state.replaced[place]!.waiters.removeValue(forKey: id)
                }
                return nil
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Starts `run` for `key` with no one waiting (a background refresh), unless a run for `key`
    /// is already under way; callers that come for `key` meanwhile join it. True when it started.
    @discardableResult
    func start(forKey key: Key, run: @escaping Run) -> Bool {
        let started = now()
        let flight = state.withLock { state -> UInt64? in
            guard state.flights[key] == nil else { return nil }
            let flight = Flight(id: state.newID(), started: started)
            state.flights[key] = flight
            flightCount.add(1, ordering: .sequentiallyConsistent)
            return flight.id
        }
        if let flight { launch(key, flight, run) }
        return flight != nil
    }

    /// What ``startBulk(forKeys:missing:run:)`` started and joined.
    struct BulkStart {
        /// The keys its run claimed (no run was under way for them), and the promise of the run's
        /// results; nil when it claimed none.
        var claimed: (keys: [Key], flight: UInt64, results: LoadPromise<[Key: Outcome]>)?
        /// For each other key, the run under way it joined (registered in the same step as the
        /// claims, so its outcome cannot be missed): leave each when done waiting.
        var joined: [Key: (flight: UInt64, promise: LoadPromise<Outcome>)] = [:]
    }

    /// Starts one run of `run` for those of `keys` no run is under way for (the keys it claims),
    /// in a task of its own, and (when `joining`) joins the runs under way for the others, in one
    /// step: callers that come for a claimed key meanwhile join it, and each claimed key's
    /// waiters get that key's result (a key `run` leaves out: the failure given).
    func startBulk(
        forKeys keys: [Key], joining: Bool = true, missing: @escaping @Sendable (Key) -> any Error,
        run: @escaping @Sendable (_ flight: UInt64, _ keys: [Key]) async -> [Key: Outcome]
    ) -> BulkStart {
        let started = now()
        var start = BulkStart()
        let (id, claimed) = state.withLock { state -> (UInt64, [Key]) in
            let id = state.newID()
            var claimed: [Key] = []
            for key in keys {
                if let flight = state.flights[key] {
                    guard joining else { continue }
                    let promise = LoadPromise<Outcome>()
                    state.flights[key]!.promises[ObjectIdentifier(promise)] = promise
                    start.joined[key] = (flight.id, promise)
                } else {
                    state.flights[key] = Flight(id: id, started: started)
                    flightCount.add(1, ordering: .sequentiallyConsistent)
                    claimed.append(key)
                }
            }
            return (id, claimed)
        }
        guard !claimed.isEmpty else { return start }
        let promise = LoadPromise<[Key: Outcome]>()
        Task {
            let results = await run(id, claimed)
            for key in claimed { finish(key, id, with: results[key] ?? .failure(missing(key))) }
            promise.fulfill(results)
        }
        start.claimed = (claimed, id, promise)
        return start
    }

    /// Joins the run under way for `key`, or starts `run` for it, and returns the promise of its
    /// result: registered before this returns, so a run that ends at once is not missed (and
    /// never run twice for one caller). A caller that stops waiting leaves
    /// (``leave(_:flight:promise:)``); the run goes on.
    ///
    /// A run under way for longer than `replacingAfter` (a loader that hangs) is not joined: a
    /// new run replaces it as the key's run. The old one's result, should it come, is handed to
    /// its own callers, and stored unless the newer run (or a write) stored first.
    func join(
        forKey key: Key, replacingAfter bound: Duration? = nil, run: @escaping Run
    ) -> (flight: UInt64, promise: LoadPromise<Outcome>) {
        let promise = LoadPromise<Outcome>()
        let started = now()
        let (flight, isNew) = state.withLock { state -> (UInt64, Bool) in
            if let current = state.flights[key] {
                guard let bound, started - current.started >= bound else {
                    state.flights[key]!.promises[ObjectIdentifier(promise)] = promise
                    return (current.id, false)
                }
                state.replaced[Replaced(key: key, id: current.id)] = current  // still counted
            }
            var flight = Flight(id: state.newID(), started: started)
            flight.promises[ObjectIdentifier(promise)] = promise
            state.flights[key] = flight
            flightCount.add(1, ordering: .sequentiallyConsistent)
            return (flight.id, true)
        }
        if isNew { launch(key, flight, run) }
        return (flight, promise)
    }

    /// Takes a caller that stopped waiting (a timeout, a cancellation) off the run it joined, so
    /// callers who give up on a hung load leave nothing behind. Does nothing once the run ended.
    func leave(_ key: Key, flight: UInt64, promise: LoadPromise<Outcome>) {
        state.withLock { state in
            _ = state[key, flight]?.promises.removeValue(forKey: ObjectIdentifier(promise))
        }
    }

    /// Notes the tags `key`'s entry carries as run `flight` begins its work (before its loader
    /// runs): a tag removal from then on that covers one of them supersedes the run.
    func noteStart(_ key: Key, flight: UInt64, tags: [[UInt8]]) {
        state.withLock { state in
            if state[key, flight] != nil, state[key, flight]!.tagsAtStart == nil {
                state[key, flight]!.tagsAtStart = tags
            }
        }
    }

    /// True while a run for `key` is under way.
    func isLoading(_ key: Key) -> Bool {
        state.withLock { $0.flights[key] != nil }
    }

    /// The runs of `key` under way: its current one and those it replaced (a replaced run is
    /// counted until it has stored its value, or not, and ended).
    func runCount(forKey key: Key) -> Int {
        state.withLock { state in
            (state.flights[key] == nil ? 0 : 1) + state.replaced.keys.filter { $0.key == key }.count
        }
    }

    /// Marks the run under way for `key`, if any, as superseded: the key was written or removed
    /// since it started. The cache calls it under the key's write lock after each write, and a
    /// run checks ``isSuperseded(_:flight:storing:)`` under the same lock before it stores, so a
    /// run that started before a write never stores over it. Costs one atomic load when nothing
    /// runs.
    func supersede(_ key: Key) {
        guard flightCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        state.withLock { state in
            if state.flights[key] != nil { state.flights[key]!.isSuperseded = true }
            state.forEachReplaced(of: key) { $0.isSuperseded = true }
        }
    }

    /// A run of `key` stored its value: the other runs of the key that began before it (those it
    /// replaced) may no longer store theirs over it.
    func supersede(_ key: Key, before flight: UInt64) {
        state.withLock { state in state.forEachReplaced(of: key) { if $0.id < flight { $0.isSuperseded = true } } }
    }

    /// ``supersede(_:)`` for every run under way (a removal of everything).
    func supersedeAll() {
        guard flightCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        state.withLock { state in
            for key in state.flights.keys { state.flights[key]!.isSuperseded = true }
            for place in state.replaced.keys { state.replaced[place]!.isSuperseded = true }
        }
    }

    /// A removal of the entries carrying `tag` (its stored bytes): supersedes the runs whose
    /// key's entry carried it when they began, and keeps the others from storing a value that
    /// carries it. Runs that had not begun their work yet are unaffected: their loader reads its
    /// source after the removal.
    func supersede(taggedWith tag: [UInt8]) {
        guard flightCount.load(ordering: .sequentiallyConsistent) > 0 else { return }
        state.withLock { state in
            for key in state.flights.keys { state.flights[key]!.removed(tag: tag) }
            for place in state.replaced.keys { state.replaced[place]!.removed(tag: tag) }
        }
    }

    /// True when run `flight` of `key` may not store a value carrying `tags`: the key was
    /// written or removed since it began, a tag removal covered it, or one of `tags` was removed
    /// since; also when the run is no longer under way.
    func isSuperseded(_ key: Key, flight: UInt64, storing tags: EntryTags = .none) -> Bool {
        state.withLock { $0[key, flight]?.forbids(tags) ?? true }
    }

    /// Callers waiting for `key`'s load (tests wait for them to gather): every run of the key,
    /// a replaced one's included.
    func waiterCount(forKey key: Key) -> Int {
        state.withLock { state in
            let current = state.flights[key].map { $0.waiters.count + $0.promises.count } ?? 0
            return state.replaced.reduce(current) { count, replaced in
                replaced.key.key == key ? count + replaced.value.waiters.count + replaced.value.promises.count : count
            }
        }
    }

    /// Runs under way, replaced ones included (tests check that everything ends).
    var runCount: Int {
        state.withLock { $0.flights.count + $0.replaced.count }
    }

    private func launch(_ key: Key, _ flight: UInt64, _ run: @escaping Run) {
        Task { self.finish(key, flight, with: await run(flight)) }
    }

    private func finish(_ key: Key, _ id: UInt64, with result: Outcome) {
        let flight = state.withLock { state -> Flight? in
            let flight =
                state.flights[key]?.id == id
                ? state.flights.removeValue(forKey: key)
                : state.replaced.removeValue(forKey: Replaced(key: key, id: id))
            if flight != nil { flightCount.subtract(1, ordering: .sequentiallyConsistent) }
            return flight
        }
        guard let flight else { return }
        for waiter in flight.waiters.values { waiter.resume(with: result) }
        for promise in flight.promises.values { promise.fulfill(result) }
    }
}
