#if Redis
import Testing

/// The cluster fixture itself: three primaries covering every slot, and a killed primary's slots
/// taken over by its replica.
@Suite(.serialized) struct RedisClusterTests {
    @Test func startsThreePrimariesAndFailsOverAKilledOne() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let masters = try cluster.masterPorts()
        #expect(masters.count == 3)
        #expect(try cluster.command(masters[0], "CLUSTER", "INFO").contains("cluster_slots_ok:16384"))

        try await cluster.kill(master: masters[0])
        let survivors = try cluster.runningPorts()
        #expect(survivors.count == 5)
        let after = try cluster.masterPorts(askingPort: survivors[0])
        #expect(after.count == 3)
        #expect(!after.contains(masters[0]))
        #expect(try cluster.command(survivors[0], "CLUSTER", "INFO").contains("cluster_slots_ok:16384"))
    }
}
#endif
