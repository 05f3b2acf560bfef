#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
import LMDBCacheRedis
import Testing

/// A load's value the writer gives up on (older than `writeRetryLimit`, or past a bound) replaced
/// nothing, but it need not be what Redis holds: the load may have skipped Redis (lookups do
/// while a change of this cache's is unsent), and the other machines serve Redis's value.
@Suite("Redis write protocol: loads given up", .serialized)
struct AbandonedLoadTests {
    typealias Machine = RemoteTierTests

    @Test("A load's value given up (held past writeRetryLimit behind a tag removal Redis did not take) leaves the loader's tiers: it then serves the fleet's value")
    func abandonedLoadLeavesNoCopy() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let (one, d1) = try await Machine.machine(server, timeout: .milliseconds(200), threshold: 1_000) {
            $0.writeRetryLimit = .seconds(1)
        }
        let (two, d2) = try await Machine.machine(server)
        defer {
            d1.remove()
            d2.remove()
        }
        two.insert("fleet", forKey: "k")
        await Machine.wait(two, "two's value landed") { $0.writes >= 1 && $0.pendingWrites == 0 }
        // Writes (scripts among them) wait; reads are served.
        _ = try server.cli(["CLIENT", "PAUSE", "600000", "WRITE"])
        defer { _ = try? server.cli(["CLIENT", "UNPAUSE"]) }
        _ = one.removeAll(taggedWith: "unrelated")
        // While the removal is unsent one's lookups skip Redis: it loads, and its value waits
        // behind the removal.
        #expect(try await one.value(forKey: "k", load: { "mine" }) == "mine")
        // Past writeRetryLimit the held value is given up: the bound in time is what is tested.
        try await Task.sleep(for: .milliseconds(1_500))
        let heard = one.statistics.remote?.changesReceived ?? 0
        _ = try server.cli(["CLIENT", "UNPAUSE"])
        await Machine.wait(one, "the removal landed and the load's value was given up") {
            $0.pendingWrites == 0 && $0.writesDropped >= 1
        }
        // The drop is applied as a change of the machine's own.
        await Machine.wait(one, "machine one dropped its copy") { $0.changesReceived > heard }
        #expect(one.value(forKey: "k") != "mine")
        #expect(try await one.value(forKey: "k", load: { "loaded again" }) == "fleet")
        one.close()
        two.close()
    }
}
#endif
