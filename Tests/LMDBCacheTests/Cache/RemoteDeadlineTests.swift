import Foundation
import LMDBCacheStorage
import Synchronization
import Testing

@testable import LMDBCache

/// Issue 32, defect 5: a get-or-load with a remote tier, with or without a lease, waits on the
/// store at most the command timeout in all, whatever the sequence of calls inside it (before,
/// the lookup, the lease and the second lookup or the polls each had a full timeout).
///
/// The store here is stalled: every exchange it is given waits out the whole time it is allowed
/// (at least that long: `Task.sleep` never wakes early) and answers nothing. So the first exchange
/// spends the get-or-load's budget, and the verdict is how many exchanges ran after it: none.
@Suite("Remote tier: one deadline per get-or-load")
struct RemoteDeadlineTests {
    @Test(
        "A stalled remote tier holds a get-or-load with a lease for one command timeout: no exchange runs after the budget is spent",
        arguments: [StalledStore.Stall.everyExchange, .allButTheLookup])
    func oneDeadlineWithALease(stall: StalledStore.Stall) async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = StalledStore(commandTimeout: .milliseconds(50), stall: stall)
        var configuration = Cache<String, String>.Configuration()
        configuration.remote = RemoteTier { _ in store }
        configuration.freshness.lease = LoadLease(holdFor: .seconds(10), waitFor: .seconds(2))
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer { cache.close() }

        let value = try await cache.value(forKey: "k") { "loaded" }

        #expect(value == "loaded")
        // Stalled everywhere: the lookup spends the budget, the lease gets no time (unavailable)
        // and the loader runs. The lookup missing at once: the lease spends the budget (held
        // elsewhere) and the wait for the other machine's value gets no time. Either way one
        // exchange waited out its time and no call after it was given any.
        #expect(store.stalledExchanges == 1, "exchanges that waited on the store: \(store.calls)")
        #expect(store.exchangesAfterTheBudgetWasSpent == 0, "calls: \(store.calls)")
    }

    @Test("Without a lease, a stalled lookup is the only exchange, and the loader runs after it")
    func oneDeadlineWithoutALease() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let store = StalledStore(commandTimeout: .milliseconds(50), stall: .everyExchange)
        var configuration = Cache<String, String>.Configuration()
        configuration.remote = RemoteTier { _ in store }
        let cache = try Cache<String, String>(directory: dir.url, configuration: configuration)
        defer { cache.close() }

        let value = try await cache.value(forKey: "k") { "loaded" }

        #expect(value == "loaded")
        #expect(store.calls == ["record"])
        #expect(store.stalledExchanges == 1)
    }
}

/// A remote store that never answers in time: each exchange waits out what its budget allows and
/// returns nothing. Writes are accepted and forgotten; the feed is silent.
final class StalledStore: RemoteStore, @unchecked Sendable {
    enum Stall: Sendable, CustomTestStringConvertible {
        /// Every exchange waits out its whole budget.
        case everyExchange
        /// The first lookup answers at once (a miss); every later exchange waits out its budget.
        case allButTheLookup

        var testDescription: String { self == .everyExchange ? "every exchange stalls" : "the lookup misses at once" }
    }

    let commandTimeout: Duration
    let stall: Stall
    private let state = Mutex<(calls: [String], stalled: Int, afterSpent: Int)>(([], 0, 0))

    init(commandTimeout: Duration, stall: Stall) {
        self.commandTimeout = commandTimeout
        self.stall = stall
    }

    /// The calls made, in order (`record`, `lease`, `waitForRecord`).
    var calls: [String] { state.withLock { $0.calls } }
    /// Exchanges that waited on the store (each until its budget ran out).
    var stalledExchanges: Int { state.withLock { $0.stalled } }
    /// Exchanges given time after an earlier one had spent the budget (the defect: each call its
    /// own full timeout).
    var exchangesAfterTheBudgetWasSpent: Int { state.withLock { $0.afterSpent } }

    /// One exchange of the call `name` under `budget`: stalls for all that remains, unless it is
    /// the first lookup and `stall` lets that answer at once. False when the budget gave it no time.
    @discardableResult
    private func exchange(_ name: String, budget: RemoteBudget) async -> Bool {
        let isFirst = state.withLock { state in
            state.calls.append(name)
            return state.calls.count == 1
        }
        let answersAtOnce = isFirst && stall == .allButTheLookup
        let ran = await budget.spend { available in
            let spentBefore = state.withLock { $0.stalled > 0 }
            if spentBefore { state.withLock { $0.afterSpent += 1 } }
            if answersAtOnce { return }
            state.withLock { $0.stalled += 1 }
            try? await Task.sleep(for: available)
        }
        return ran != nil
    }

    func record(forKey key: [UInt8], budget: RemoteBudget) async -> [UInt8]? {
        await exchange("record", budget: budget)
        return nil
    }

    func records(forKeys keys: [[UInt8]], budget: RemoteBudget) async -> [[UInt8]?] {
        await exchange("records", budget: budget)
        return keys.map { _ in nil }
    }

    /// Held by another machine when the store could say so (then the cache waits for that
    /// machine's value, more exchanges), unavailable when the budget gave it no time.
    func lease(forKey key: [UInt8], holdFor: Duration, budget: RemoteBudget) async -> RemoteLease {
        await exchange("lease", budget: budget) ? .heldElsewhere : .unavailable
    }

    func waitForRecord(forKey key: [UInt8], timeout: Duration, budget: RemoteBudget) async -> [UInt8]? {
        await exchange("waitForRecord", budget: budget)
        return nil
    }

    func write(
        _ record: [UInt8], forKey key: [UInt8], keepUntil: UInt64, tags: [[UInt8]], absentSince: UInt64?,
        loadStamp: UInt64?
    ) {}
    func loadStamp() -> UInt64 { 0 }
    func remove(forKey key: [UInt8]) {}
    func discardDamaged(forKey key: [UInt8]) {}
    func removeAll(taggedWith tag: [UInt8]) {}
    func removeAll() {}
    func release(_ token: [UInt8], forKey key: [UInt8]) {}
    let feed: any ChangeFeed = SilentFeed()
    var dropsDiskTierOnMissedChanges: Bool { false }
    var statistics: RemoteStatistics { RemoteStatistics() }
    func close() {}

    private struct SilentFeed: ChangeFeed {
        func publish(_ change: CacheChange) {}
        func receive() throws -> ChangeDelivery { .changes([]) }
    }
}
