import CacheTestSupport
import Foundation
import PropertyBased
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Random sequences of concurrent get-or-loads (single-key with each ``Freshness`` option, and
/// bulk) on a two-tier `Cache<String, String>`, their loaders held by the test until a later step
/// releases them, interleaved with writes, removals, tag removals, clock moves and another cache's
/// changes on the same directory. The test waits for the system to settle on events (a loader call
/// recorded, a caller's task ended, a waiter gathered, a timer armed), never on elapsed time, and
/// after every step checks:
///
/// - (a) the loader runs exactly when the model says: at most once per key per generation (a
///   generation of a key ends at every write or removal covering it, and when a load of it ends
///   without storing), and a bulk loader gets exactly the keys both tiers missed less those a load
///   under way covers (a bulk caller gets that load's outcome instead of loading them again);
/// - (b) nothing removed (by key, by tag, everything, or by the other cache) comes back from a
///   load that started before the removal: not in `value(forKey:)`, not in `memory`, not on disk;
/// - (c) plain lookups never return an expired value;
/// - (d) every waiter ends (value, error, timeout) once its loader is released or its timeout
///   passes, and leaves nothing behind (`loads.waiterCount(forKey:)`, `loads.isLoading`, the
///   timeout clock's sleepers);
/// - (e) every value returned is one the model allows (the latest write, or a loader's result), and
///   a load's result that nothing superseded is stored.
///
/// Steps run one at a time (each caller's task runs on), so two callers never race between a
/// refresh's due check and its start: a refresh started twice for one due value by such a race is
/// out of this test's reach. `LMDBCACHE_MODEL_SEQUENCES` sets the count (default 400, about 25 s
/// in a debug build on 2 cores), `LMDBCACHE_MODEL_SEED` replays a printed seed.
@Suite("Model-based: concurrent get-or-load against a model")
struct GetOrLoadModelTests {
    @Test(
        "concurrent get-or-loads, writes, removals and another cache's changes agree with the model",
        .shrinking, ModelRun.seed)
    func getOrLoadMatchesModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 400), input: LoadCase.generator()) { test in
            await Self.run(test)
        }
        print(ModelRun.summary("GetOrLoad"))
    }

    static func open(_ dir: TemporaryDirectory, clock: ManualClock, timeouts: ManualTimeoutClock) throws -> Cache<
        String, String
    > {
        var configuration = Cache<String, String>.Configuration()
        configuration.clock = clock.clock
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.disk.accessTimeGranularity = .zero
        configuration.timeoutClock = timeouts
        configuration.coherence = .init(pollInterval: .seconds(3_600))  // followed when the test says
        return try Cache(directory: dir.url, configuration: configuration)
    }

    static func run(_ test: LoadCase) async {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        let timeouts = ManualTimeoutClock()
        let cache: Cache<String, String>
        let second: Cache<String, String>
        do {
            cache = try open(dir, clock: time, timeouts: timeouts)
            second = try open(dir, clock: time, timeouts: timeouts)
        } catch {
            Issue.record("open failed: \(error)")
            return
        }
        defer {
            cache.close()
            second.close()
        }
        let world = LoadWorld(cache: cache, second: second, time: time, timeouts: timeouts)
        var steps = 0
        defer { ModelRun.count("GetOrLoad", steps: steps) }
        await withTaskGroup(of: Void.self) { group in
            for (index, step) in test.steps.enumerated() {
                steps += 1
                world.begin("step \(index) \(step)", index)
                if let caller = world.apply(step) {
                    let control = world.control
                    let results = world.results
                    group.addTask {
                        let result: CallerResult
                        do {
                            switch caller.call {
                            case .single(let key, let mode, let expiry):
                                result = .value(
                                    try await cache.value(
                                        forKey: key, expiresAfter: expiry, freshness: mode.freshness,
                                        load: control.single(key)))
                            case .bulk(let keys, let tags, let mode, let expiry):
                                result = .values(
                                    try await cache.values(
                                        forKeys: keys, expiresAfter: expiry, freshness: mode.freshness, tags: tags,
                                        load: control.bulk))
                            }
                        } catch {
                            result = CallerResult(error: error)
                        }
                        results.withLock { $0[caller.id] = result }
                    }
                }
                await world.settleAndCheck()
                if world.check.failed { break }
            }
            // Everything still pending is released (a value each), and then nothing is left.
            var rounds = 0
            while !world.check.failed, let first = world.pendingFlights.first, rounds < 64 {
                rounds += 1
                world.begin("at the end, releasing L\(first.call.map(String.init) ?? "?")", test.steps.count + rounds)
                world.release(first, outcome: 0)
                await world.settleAndCheck()
            }
            if !world.check.failed { world.checkNothingLeft() }
            if world.check.failed {
                // Printed as well: a failure the shrinker's replay does not repeat (a race) would
                // otherwise leave no message.
                print("model GetOrLoad failed: \(world.check.message ?? "?")\n  steps: \(test.steps)")
                // Let every task end: loaders fail from now on, timers fire, waiters are cancelled.
                world.control.drain()
                timeouts.advance(by: .seconds(1_000_000))
                group.cancelAll()
            }
            await group.waitForAll()
        }
    }
}

/// A caller's task: what it calls.
struct CallerTask: Sendable {
    enum Call: Sendable {
        case single(String, LoadModel.Mode, Duration?)
        case bulk([String], Set<String>, LoadModel.Mode, Duration?)
    }
    let id: Int
    let call: Call
}

/// The model of one sequence, the caches it drives, and the checks.
final class LoadWorld {
    final class Flight {
        let id: Int
        let keys: [String]
        let bulk: Bool
        let refresh: Bool
        let startGeneration: [String: Int]
        let expiresAfter: Duration?
        let staleFor: Duration?
        let bulkTags: Set<String>
        let started: String
        /// The loader call it was matched with.
        var call: Int?
        /// Keys written or removed since it started (it must not store them), and by what.
        var supersededBy: [String: String] = [:]
        /// Keys whose removal may or may not supersede it (a tag removal of a tag the key's entry
        /// carries, when the load's own value does not carry it; another cache's removal of a key
        /// this one does not hold): either outcome is allowed.
        var maybeSupersededBy: [String: String] = [:]
        /// Tags removed since it started: a value it stores carrying one of them would come back.
        var removedTags: [String: String] = [:]
        /// When it started, on the timeout clock (milliseconds): a caller with a hard timeout
        /// replaces it once it is `Cache.hungLoadBound(hard)` old.
        var startedAt: UInt64 = 0

        init(
            id: Int, keys: [String], bulk: Bool, refresh: Bool, generation: [String: Int], expiresAfter: Duration?,
            staleFor: Duration?, tags: Set<String>, started: String
        ) {
            self.id = id
            self.keys = keys
            self.bulk = bulk
            self.refresh = refresh
            startGeneration = Dictionary(uniqueKeysWithValues: keys.map { ($0, generation[$0] ?? 0) })
            self.expiresAfter = expiresAfter
            self.staleFor = staleFor
            bulkTags = tags
            self.started = started
        }

        var name: String {
            "\(refresh ? "refresh" : bulk ? "bulk load" : "load") L\(call.map(String.init) ?? "?") of \(keys) (\(started))"
        }
    }

    final class Caller {
        let id: Int
        let task: CallerTask
        let started: String
        let single: Bool
        /// The keys it did not find, in its order (bulk), or its key.
        var pending: [String] = []
        var hits: [String: String] = [:]
        /// Keys it found stale (within their window) while asking for staleIfError.
        var staleAtCall: Set<String> = []
        /// Key → the flight it waits for.
        var waiting: [String: Int] = [:]
        /// The flight a bulk caller started itself (it waits on its promise, not as a waiter).
        var ownFlight: Int?
        /// Keys a load under way (not its own) covered when it was called.
        var covered: [String: String] = [:]
        var results: [String: Result<String, ErrorText>] = [:]
        var soft: UInt64?
        var softFired = false
        var hard: UInt64?
        /// The results the model allows, once it expects the caller to have ended.
        var expected: [CallerResult]?

        init(id: Int, task: CallerTask, started: String, single: Bool) {
            self.id = id
            self.task = task
            self.started = started
            self.single = single
        }
    }

    struct ErrorText: Error { let text: String }

    let cache: Cache<String, String>
    let second: Cache<String, String>
    let time: ManualClock
    let timeouts: ManualTimeoutClock
    let control = ControlledLoaders()
    let results = Locked<[Int: CallerResult]>([:])
    var check = ModelCheck()

    var entries: [String: ModelEntry] = [:]
    var generation: [String: Int] = [:]
    var flights: [Int: Flight] = [:]
    var covering: [String: Int] = [:]
    var callers: [Int: Caller] = [:]
    var expectedCalls = 0
    var matchedCalls = 0
    var nextFlight = 0
    var nextCaller = 0
    var timeoutNow: UInt64 = 0
    /// Stores the model could not decide (see ``Flight/maybeSupersededBy``): key → (if stored, if not).
    var undecided: [String: (stored: ModelEntry, not: ModelEntry?)] = [:]
    /// Load results that must not be in the cache, and why.
    var forbidden: [String: String] = [:]
    var stepName = ""
    var stepIndex = 0

    init(cache: Cache<String, String>, second: Cache<String, String>, time: ManualClock, timeouts: ManualTimeoutClock) {
        self.cache = cache
        self.second = second
        self.time = time
        self.timeouts = timeouts
    }

    var now: UInt64 { time.clock.milliseconds }

    func begin(_ name: String, _ index: Int) {
        stepName = name
        stepIndex = index
    }

    var pendingFlights: [Flight] { flights.values.sorted { $0.id < $1.id } }

    // MARK: Steps

    /// Applies `step` to the caches and the model; a caller's task to start, if any.
    func apply(_ step: LoadStep) -> CallerTask? {
        switch step {
        case .get(let k, let m, let e):
            return get(LoadModel.keys[k], LoadModel.modes[m], LoadModel.expiries[e])
        case .bulk(let mask, let t, let m, let e):
            return bulk(LoadModel.keys(mask), LoadModel.tags(t), LoadModel.modes[m], LoadModel.expiries[e])
        case .insert(let k, let t, let e):
            let key = LoadModel.keys[k]
            let value = "\(key)=s\(stepIndex)"
            let tags = LoadModel.tags(t)
            cache.insert(value, forKey: key, expiresAfter: LoadModel.expiries[e], tags: tags)
            write(
                key,
                ModelEntry(
                    value: value, tags: tags, now: now, expiresAfter: LoadModel.expiries[e], staleFor: nil,
                    origin: "step \(stepIndex)"), "the insert at step \(stepIndex)")
        case .remove(let k):
            cache.removeValue(forKey: LoadModel.keys[k])
            write(LoadModel.keys[k], nil, "the removal at step \(stepIndex)")
        case .removeTag(let t):
            cache.removeAll(taggedWith: LoadModel.tagNames[t])
            removeTag(LoadModel.tagNames[t], "the removal of tag \(LoadModel.tagNames[t]) at step \(stepIndex)")
        case .removeAll:
            cache.removeAll()
            for key in LoadModel.keys { write(key, nil, "removeAll at step \(stepIndex)") }
        case .advance(let t):
            let duration = LoadModel.advances[t]
            time.advance(by: duration)
            timeouts.advance(by: duration)
            timeoutNow += duration.milliseconds
            fireTimers()
        case .release(let index, let outcome):
            let pending = pendingFlights
            if !pending.isEmpty { release(pending[index % pending.count], outcome: outcome) }
        case .other(let op, let k, let t):
            other(op, LoadModel.keys[k], LoadModel.tags(t), LoadModel.tagNames[k % 2])
        }
        return nil
    }

    func get(_ key: String, _ mode: LoadModel.Mode, _ expiry: Duration?) -> CallerTask {
        nextCaller += 1
        let task = CallerTask(id: nextCaller, call: .single(key, mode, expiry))
        let caller = Caller(id: nextCaller, task: task, started: stepName, single: true)
        callers[caller.id] = caller
        let freshness = mode.freshness
        if let entry = entries[key], entry.isLive(now) {
            caller.expected = [.value(entry.value)]
            if freshness.refreshAfter != nil, isDue(entry), covering[key] == nil {
                startFlight(
                    [key], bulk: false, refresh: true, expiresAfter: expiry, staleFor: freshness.staleIfError, tags: [])
            }
            return task
        }
        let stale = freshness.staleIfError != nil && entries[key]?.isServableStale(now) == true
        var joined = covering[key]
        if let id = joined, let old = flights[id], let hard = freshness.hardTimeout,
            timeoutNow - old.startedAt >= Cache<String, String>.hungLoadBound(hard).milliseconds
        {
            // Hung past this caller's bound: a new load replaces it as the key's load; the old one
            // still stores, unless the new one (or a write) stores first.
            joined = nil
        }
        let flight =
            joined
            ?? startFlight(
                [key], bulk: false, refresh: false, expiresAfter: expiry, staleFor: freshness.staleIfError, tags: [])
        caller.pending = [key]
        caller.waiting[key] = flight
        if stale { caller.staleAtCall = [key] }
        if stale, let soft = freshness.timeout { caller.soft = timeoutNow + soft.milliseconds }
        if let hard = freshness.hardTimeout { caller.hard = timeoutNow + hard.milliseconds }
        return task
    }

    func bulk(_ keys: [String], _ tags: Set<String>, _ mode: LoadModel.Mode, _ expiry: Duration?) -> CallerTask {
        nextCaller += 1
        let task = CallerTask(id: nextCaller, call: .bulk(keys, tags, mode, expiry))
        let caller = Caller(id: nextCaller, task: task, started: stepName, single: false)
        callers[caller.id] = caller
        let freshness = mode.freshness
        var due: [String] = []
        for key in keys {
            if let entry = entries[key], entry.isLive(now) {
                caller.hits[key] = entry.value
                if freshness.refreshAfter != nil, isDue(entry) { due.append(key) }
                continue
            }
            if freshness.staleIfError != nil, entries[key]?.isServableStale(now) == true {
                caller.staleAtCall.insert(key)
            }
            caller.pending.append(key)
        }
        let refreshing = due.filter { covering[$0] == nil }
        if !refreshing.isEmpty {
            startFlight(
                refreshing, bulk: true, refresh: true, expiresAfter: expiry, staleFor: freshness.staleIfError,
                tags: tags)
        }
        if caller.pending.isEmpty {
            caller.expected = [.values(caller.hits)]
            return task
        }
        let claimed = caller.pending.filter { covering[$0] == nil }
        if !claimed.isEmpty {
            caller.ownFlight = startFlight(
                claimed, bulk: true, refresh: false, expiresAfter: expiry, staleFor: freshness.staleIfError, tags: tags)
        }
        for key in caller.pending {
            caller.waiting[key] = covering[key]!
            if covering[key] != caller.ownFlight { caller.covered[key] = flights[covering[key]!]!.name }
        }
        return task
    }

    @discardableResult
    func startFlight(
        _ keys: [String], bulk: Bool, refresh: Bool, expiresAfter: Duration?, staleFor: Duration?, tags: Set<String>
    ) -> Int {
        nextFlight += 1
        let flight = Flight(
            id: nextFlight, keys: keys, bulk: bulk, refresh: refresh, generation: generation,
            expiresAfter: expiresAfter, staleFor: staleFor, tags: tags, started: "started at step \(stepIndex)")
        flight.startedAt = timeoutNow
        flights[flight.id] = flight
        for key in keys { covering[key] = flight.id }
        expectedCalls += 1
        return flight.id
    }

    func isDue(_ entry: ModelEntry) -> Bool {
        now > entry.stored && now - entry.stored >= LoadModel.refreshAfter.milliseconds
    }

    /// A write or removal of `key` (nil): a new generation, and the load under way superseded.
    func write(_ key: String, _ entry: ModelEntry?, _ why: String) {
        entries[key] = entry
        undecided[key] = nil
        bump(key)
        for flight in flights(of: key) where flight.supersededBy[key] == nil { flight.supersededBy[key] = why }
    }

    /// Every load of `key` under way: the key's current one, and those it replaced.
    func flights(of key: String) -> [Flight] {
        flights.values.filter { $0.keys.contains(key) }
    }

    func bump(_ key: String) {
        generation[key, default: 0] += 1
        control.setGeneration(key, generation[key]!)
    }

    /// A tag removal: the entries carrying it go; a load under way whose value carries it must
    /// not store it; a load of a key that carried it may or may not (its own value is untagged).
    func removeTag(_ tag: String, _ why: String) {
        for key in LoadModel.keys {
            guard let entry = entries[key], entry.tags.contains(tag) else { continue }
            let held = entry.isHeld(now)
            entries[key] = nil
            undecided[key] = nil
            guard held else { continue }
            bump(key)
            for flight in flights(of: key) where flight.supersededBy[key] == nil {
                flight.maybeSupersededBy[key] = flight.maybeSupersededBy[key] ?? why
            }
        }
        for flight in flights.values where flight.removedTags[tag] == nil { flight.removedTags[tag] = why }
    }

    /// A change through the second cache: the first cache's queued writes are committed first, the
    /// second's after, and then the first follows the change log.
    func other(_ op: Int, _ key: String, _ tags: Set<String>, _ tag: String) {
        do {
            try cache.flush()
            let why = "the second cache's change at step \(stepIndex)"
            switch op {
            case 0:
                let value = "\(key)=o\(stepIndex)"
                second.insert(value, forKey: key, tags: tags)
                try second.flush()
                write(
                    key,
                    ModelEntry(
                        value: value, tags: tags, now: now, expiresAfter: nil, staleFor: nil,
                        origin: "the second cache at step \(stepIndex)"), why)
            case 1:
                second.removeValue(forKey: key)
                try second.flush()
                if entries[key]?.isHeld(now) == true {
                    write(key, nil, why)
                } else {
                    // Nothing there to remove: whether the change log carries it is not the contract.
                    entries[key] = nil
                    undecided[key] = nil
                    bump(key)
                    for flight in flights(of: key) where flight.supersededBy[key] == nil {
                        flight.maybeSupersededBy[key] = flight.maybeSupersededBy[key] ?? why
                    }
                }
            case 2:
                second.removeAll(taggedWith: tag)
                try second.flush()
                removeTag(tag, "the second cache's removal of tag \(tag) at step \(stepIndex)")
            default:
                second.removeAll()
                try second.flush()
                for key in LoadModel.keys { write(key, nil, why) }
            }
            cache.followChanges()
        } catch {
            check.expect(false, "\(stepName): threw \(error)")
        }
    }

    /// Timeouts whose deadline the timeout clock passed end their wait.
    func fireTimers() {
        for caller in callers.values.sorted(by: { $0.id < $1.id }) where caller.single && caller.expected == nil {
            let key = caller.pending[0]
            if let soft = caller.soft, !caller.softFired, soft <= timeoutNow {
                caller.softFired = true
                if let value = serve(caller, key) { end(caller, [.value(value)]) }
            }
            if caller.expected == nil, let hard = caller.hard, hard <= timeoutNow {
                end(caller, [serve(caller, key).map { .value($0) } ?? .error("loadTimedOut")])
            }
        }
    }

    /// What a caller that found `key` stale gets in place of a failed or slow load: what the
    /// cache holds now, live or within its window.
    func serve(_ caller: Caller, _ key: String) -> String? {
        guard caller.staleAtCall.contains(key), let entry = entries[key], entry.isHeld(now) else { return nil }
        return entry.value
    }

    func end(_ caller: Caller, _ expected: [CallerResult]) {
        caller.expected = expected
        caller.waiting = [:]
    }

    /// Lets `flight`'s loader return `outcome` (see ``LoadModel/outcomeNames``).
    func release(_ flight: Flight, outcome: Int) {
        guard let call = flight.call else { return }
        var results: [String: Result<String, ErrorText>] = [:]
        var tags: Set<String> = []
        var cacheable = true
        let failed = ErrorText(text: "L\(call) failed")
        let notFound = ErrorText(text: "notFound")
        if flight.bulk {
            tags = flight.bulkTags
            var values: [String: String] = [:]
            switch outcome {
            case 2, 4:
                for key in flight.keys { results[key] = .failure(failed) }
                control.release(call, with: .failure)
            default:
                for (index, key) in flight.keys.enumerated() {
                    if outcome == 3 || (outcome == 1 && index == 0) {
                        results[key] = .failure(notFound)
                    } else {
                        values[key] = "\(key)@L\(call)"
                        results[key] = .success(values[key]!)
                    }
                }
                control.release(call, with: .values(values))
            }
        } else {
            let key = flight.keys[0]
            let value = "\(key)@L\(call)"
            switch outcome {
            case 3:
                results[key] = .failure(failed)
                control.release(call, with: .failure)
            default:
                tags = outcome == 1 ? ["t0"] : outcome == 2 ? ["t1"] : []
                cacheable = outcome != 4
                results[key] = .success(value)
                control.release(call, with: .value(value, tags: tags, cacheable: cacheable))
            }
        }
        flights[flight.id] = nil
        for key in flight.keys {
            if covering[key] == flight.id { covering[key] = nil }
            guard case .success(let value) = results[key] else { continue }
            let removedTag = tags.compactMap { flight.removedTags[$0] }.first
            if !cacheable {
                forbidden[value] = "\(flight.name) returned it as not cacheable"
            } else if let why = flight.supersededBy[key] ?? removedTag {
                forbidden[value] = "\(flight.name) started before \(why)"
            } else {
                let entry = ModelEntry(
                    value: value, tags: tags, now: now, expiresAfter: flight.expiresAfter, staleFor: flight.staleFor,
                    origin: flight.name)
                if flight.maybeSupersededBy[key] != nil {
                    undecided[key] = (entry, entries[key])
                }
                entries[key] = entry
                // The loads of the key it replaced may no longer store over it.
                for older in flights(of: key) where older.id < flight.id && older.supersededBy[key] == nil {
                    older.supersededBy[key] = "\(flight.name), a newer load of the key, which stored first"
                }
            }
        }
        for caller in callers.values.sorted(by: { $0.id < $1.id }) where caller.expected == nil {
            for (key, id) in caller.waiting where id == flight.id {
                caller.waiting[key] = nil
                caller.results[key] = results[key]
            }
            if caller.single {
                guard let result = caller.results[caller.pending[0]] else { continue }
                switch result {
                case .success(let value): end(caller, [.value(value)])
                case .failure(let error):
                    end(caller, [serve(caller, caller.pending[0]).map { .value($0) } ?? .error(error.text)])
                }
            } else if caller.waiting.isEmpty {
                finishBulk(caller)
            }
        }
    }

    func finishBulk(_ caller: Caller) {
        var values = caller.hits
        var failures: [CallerResult] = []
        for key in caller.pending {
            switch caller.results[key] {
            case .success(let value): values[key] = value
            case .failure(let error):
                if error.text == "notFound" { continue }
                if caller.staleAtCall.contains(key), let entry = entries[key], entry.isHeld(now) {
                    values[key] = entry.value
                } else {
                    failures.append(.error(error.text))
                }
            case nil: break
            }
        }
        end(caller, failures.isEmpty ? [.values(values)] : failures)
    }

    // MARK: Settling and checking

    /// Waiters on `key`'s flights (the current one and any it replaced): single callers, and bulk
    /// callers joining another's load (registered in the step that claims their other keys, after
    /// their lookups: so a settled count also says the caller's lookups are done).
    func waiterBounds(_ key: String) -> ClosedRange<Int> {
        var singles = 0
        var bulk = 0
        for caller in callers.values where caller.expected == nil {
            guard let flight = caller.waiting[key] else { continue }
            if caller.single { singles += 1 } else if caller.ownFlight != flight { bulk += 1 }
        }
        return (singles + bulk)...(singles + bulk)
    }

    var expectedSleepers: Int {
        callers.values.filter { $0.expected == nil }.reduce(0) { count, caller in
            count + (caller.soft != nil && !caller.softFired ? 1 : 0) + (caller.hard != nil ? 1 : 0)
        }
    }

    /// Waits until every event the model expects has happened (or more loader calls than expected
    /// came), up to the hang bound; then, for at most ten seconds more, for the stragglers a busy
    /// machine delays (a waiter leaving, a timer cancelled) to bring every count compared after to
    /// the model's; then compares. Neither limit decides a result on a machine that is merely slow:
    /// each bounds a wait for an event that takes microseconds, and is reported as a hang.
    func settleAndCheck() async {
        let ended = callers.values.filter { $0.expected != nil }.map(\.id)
        func settled(exactly: Bool) -> Bool {
            let calls = control.callCount
            if calls > expectedCalls { return true }
            guard calls == expectedCalls else { return false }
            let done = results.withLock { results in ended.allSatisfy { results[$0] != nil } }
            guard done else { return false }
            for key in LoadModel.keys {
                if cache.loads.isLoading(key) != (covering[key] != nil) { return false }
                // A replaced load (no caller waits for it) has stored its value, or not, and ended.
                if cache.loads.runCount(forKey: key) != flights(of: key).count { return false }
                let waiters = cache.loads.waiterCount(forKey: key)
                let bounds = waiterBounds(key)
                if waiters < bounds.lowerBound || (exactly && waiters > bounds.upperBound) { return false }
            }
            let sleepers = timeouts.sleeperCount
            return exactly ? sleepers == expectedSleepers : sleepers >= expectedSleepers
        }
        var hung: String?
        for (exactly, limit) in [(false, hangBound), (true, Duration.seconds(10))] where hung == nil {
            let deadline = ContinuousClock.now + limit
            while !settled(exactly: exactly) {
                if ContinuousClock.now > deadline {
                    hung = "\(limit)"
                    break
                }
                await Task.yield()
            }
        }
        let context = hung.map { " (hung: nothing more happened within \($0))" } ?? ""
        matchCalls(context)
        checkCallers(context)
        for key in LoadModel.keys { checkKey(key, context) }
    }

    /// (a): each loader call is one the model expects.
    func matchCalls(_ context: String) {
        let calls = control.calls
        while matchedCalls < calls.count {
            let call = calls[matchedCalls]
            matchedCalls += 1
            if let flight = flights.values.sorted(by: { $0.id < $1.id }).first(where: {
                $0.call == nil && Set($0.keys) == Set(call.keys)
            }) {
                flight.call = call.id
                // Bulk: exactly the keys both tiers missed, in the caller's order.
                check.expect(
                    call.keys == flight.keys,
                    "(a) after \(stepName): bulk loader called with \(call.keys), expected \(flight.keys)\(context)")
                continue
            }
            let why = call.keys.map { key -> String in
                let gen = call.generations[call.keys.firstIndex(of: key)!]
                if let id = covering[key], let flight = flights[id] {
                    return "\(key) (generation \(gen)) is covered by \(flight.name)"
                }
                if let entry = entries[key], entry.isLive(now) { return "\(key) (generation \(gen)) holds \(entry)" }
                if let waiting = callers.values.first(where: { !$0.single && $0.results[key] != nil }) {
                    return
                        "\(key) (generation \(gen)) was covered by a load whose outcome bulk caller #\(waiting.id) (\(waiting.started)) got"
                }
                return "\(key) (generation \(gen)) needs no load now"
            }
            check.expect(
                false,
                "(a) after \(stepName): unexpected loader call L\(call.id) for \(call.keys): \(why.joined(separator: "; "))\(context)"
            )
        }
        for flight in flights.values where flight.call == nil {
            check.expect(false, "(a) after \(stepName): no loader call for \(flight.name)\(context)")
        }
    }

    /// (d) and (e): callers end when and how the model says.
    func checkCallers(_ context: String) {
        let actual = results.withLock { $0 }
        for caller in callers.values.sorted(by: { $0.id < $1.id }) {
            let description = "caller #\(caller.id) (\(caller.started))"
            let got = actual[caller.id]
            if let expected = caller.expected {
                guard let got else {
                    check.expect(
                        false, "(d) after \(stepName): \(description) did not end; expected \(expected)\(context)")
                    continue
                }
                let note =
                    caller.single || caller.covered.isEmpty
                    ? ""
                    : " (when it was called, \(caller.covered.sorted { $0.key < $1.key }.map { "\($0.key) was covered by \($0.value)" }.joined(separator: ", ")): it gets that outcome)"
                check.expect(
                    expected.contains(got),
                    "(e) after \(stepName): \(description) got \(got), the model allows \(expected)\(note)\(context)")
            } else if let got {
                let on = caller.waiting.values.compactMap { flights[$0]?.name }
                check.expect(
                    false,
                    "(d)/(e) after \(stepName): \(description) ended with \(got) while waiting for \(on)\(context)")
            }
        }
    }

    /// (b), (c), (d), (e) for one key: both tiers and a plain lookup agree with the model, and the
    /// coalescer holds what the model says.
    func checkKey(_ key: String, _ context: String) {
        let plain = cache.value(forKey: key)
        if let (stored, not) = undecided.removeValue(forKey: key) {
            entries[key] = plain == stored.value ? stored : not
        }
        let entry = entries[key]
        let expected = entry.flatMap { $0.isLive(now) ? $0.value : nil }
        func verdict(_ got: String?, _ place: String) -> String {
            guard let got else {
                if let entry,
                    entry.origin.hasPrefix("load") || entry.origin.hasPrefix("refresh")
                        || entry.origin.hasPrefix("bulk")
                {
                    return
                        "(e) after \(stepName): \(place) of \(key) is nothing; \(entry.origin)'s value \(entry.value) was allowed to be stored (nothing superseded it)\(context)"
                }
                return
                    "(e) after \(stepName): \(place) of \(key) is nothing, expected \(entry?.description ?? "-")\(context)"
            }
            if let entry, entry.value == got, !entry.isLive(now) {
                return "(c) after \(stepName): \(place) of \(key) returned \(got), expired\(context)"
            }
            if let why = forbidden[got] {
                return "(b) after \(stepName): \(place) of \(key) is \(got), which came back: \(why)\(context)"
            }
            return
                "(e) after \(stepName): \(place) of \(key) is \(got), expected \(expected ?? "nothing") (\(entry?.description ?? "no entry"))\(context)"
        }
        check.expect(plain == expected, verdict(plain, "value(forKey:)"))
        let memory = cache.memory.value(forKey: key)
        check.expect(memory == nil || memory == expected, verdict(memory, "the memory tier's value"))
        let bytes = try? cache.disk!.data(forKey: key)
        let disk = bytes.flatMap { $0 }.map { String(decoding: $0, as: UTF8.self) }
        check.expect(disk == expected, verdict(disk, "the disk tier's value"))

        let loading = cache.loads.isLoading(key)
        let flight = covering[key].flatMap { flights[$0] }
        check.expect(
            loading == (flight != nil),
            "(d) after \(stepName): loads.isLoading(\(key)) is \(loading), the model has \(flight?.name ?? "no load")\(context)"
        )
        let waiters = cache.loads.waiterCount(forKey: key)
        let bounds = waiterBounds(key)
        check.expect(
            bounds.contains(waiters),
            "(d) after \(stepName): loads.waiterCount(forKey: \(key)) is \(waiters), the model has \(bounds) callers waiting for \(flight?.name ?? "no load")\(context)"
        )
        if key == LoadModel.keys.last {
            let sleepers = timeouts.sleeperCount
            check.expect(
                sleepers == expectedSleepers,
                "(d) after \(stepName): \(sleepers) timers on the timeout clock, the model has \(expectedSleepers)\(context)"
            )
        }
    }

    /// (d) at the end: every loader released, every caller ended, nothing left behind.
    func checkNothingLeft() {
        check.expect(flights.isEmpty, "(d) at the end: loads left in the model: \(flights.values.map(\.name))")
        for key in LoadModel.keys {
            check.expect(!cache.loads.isLoading(key), "(d) at the end: \(key) still loading")
            check.expect(cache.loads.waiterCount(forKey: key) == 0, "(d) at the end: waiters left for \(key)")
        }
        let ended = results.withLock { $0.count }
        check.expect(ended == callers.count, "(d) at the end: \(callers.count - ended) callers never ended")
    }
}
