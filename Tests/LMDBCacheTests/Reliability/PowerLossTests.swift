import CacheTestSupport
import Foundation
import Testing

/// Power loss, not only kill -9 (ALICE, OSDI '14; CrashMonkey, OSDI '18): a real writer's writes
/// and syncs to the store's files are recorded by an `LD_PRELOAD` interposer; each crash state
/// holds everything before the last completed sync plus a random subset of later writes, some
/// torn at 512-byte sectors. `LMDBCACHE_POWERLOSS_STATES` states in all (CI 150; the soak
/// 20,000): 30 % `.batched`, 30 % `.synchronous`, 40 % `.periodic`.
///
/// One allowance: a power failure before a brand-new store's first sync completed (LMDB's freshly
/// written, unsynced meta pages torn or lost) may leave a file that is set aside on open. Nothing
/// was confirmed then, so nothing is lost; such states are counted apart.
@Suite("Reliability: power loss", .serialized)
struct PowerLossTests {
    private static func states(_ share: Int) -> Int { max(1, PowerLossRun.totalStates * share / 100) }

    @Test("after a power loss a .batched store opens, verifies clean and holds every write flush() confirmed")
    func batchedStoreKeepsFlushedWritesThroughPowerLoss() throws {
        let tally = try PowerLossRun(mode: "batched", states: Self.states(30)).run()
        print("power loss, batched: \(tally)")
        #expect(tally.held + tally.setAsideBeforeFirstSync == tally.total, "\(tally): \(tally.examples)")
        #expect(tally.verifyClean == tally.total, "\(tally): \(tally.examples)")
    }

    @Test("after a power loss a .synchronous store opens, verifies clean and holds every returned insert")
    func synchronousStoreKeepsReturnedWritesThroughPowerLoss() throws {
        let tally = try PowerLossRun(mode: "synchronous", states: Self.states(30)).run()
        print("power loss, synchronous: \(tally)")
        #expect(tally.held + tally.setAsideBeforeFirstSync == tally.total, "\(tally): \(tally.examples)")
        #expect(tally.verifyClean == tally.total, "\(tally): \(tally.examples)")
    }

    @Test("after a power loss a .periodic store holds every flushed write or is set aside, never silently short")
    func periodicStoreNeverOpensSilentlyMissingFlushedWrites() throws {
        let tally = try PowerLossRun(mode: "periodic", states: Self.states(40)).run()
        print("power loss, periodic: \(tally)")
        #expect(tally.silentlyMissing == 0, "\(tally): \(tally.examples)")
        #expect(tally.wrongValue == 0 && tally.crash == 0 && tally.openError == 0, "\(tally): \(tally.examples)")
        #expect(
            tally.held + tally.setAside + tally.setAsideBeforeFirstSync == tally.total, "\(tally): \(tally.examples)")
        #expect(tally.verifyClean == tally.total && tally.verifyCrash == 0, "\(tally): \(tally.examples)")
    }
}
