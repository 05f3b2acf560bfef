#if Redis
import Foundation
import LMDBCacheRedis
import Testing

/// A removal of everything (or of a tag) runs beside the machine's other writes, not ahead of
/// them: in a cluster it fences all 16,384 hash slots first, which takes seconds, and writes
/// queued behind it for longer than `writeRetryLimit` would be dropped.
@Suite("Redis write protocol: broad removals", .serialized)
struct BroadRemovalTests {
    @Test("A removeAll held up on one primary does not hold up a later write to another, and the newer write survives it")
    func writesPassAHeldRemoveAll() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let ports = cluster.nodes.map(\.port)
        let seeds = ports.dropFirst().map(String.init).joined(separator: ",")
        // A command timeout past the hang bound: the removal waits on the paused primary rather
        // than fail and let the writer go on.
        let options = ["cluster=\(seeds)", "timeout=600000", "namespace=bg"]
        let writer = try FleetNode("broad-writer", port: ports[0], options: options)
        let reader = try FleetNode("broad-reader", port: ports[0], options: options)
        for node in [writer, reader] { try await node.waitFor("subscribed") { $0["subscribed"] == 1 } }

        // The key's primary, and another one to pause.
        let slot = HashSlot.slot(of: Array("bg:v:k".utf8))
        let roles = try cluster.roles(askingPort: ports[0])
        let primaries = roles.filter { !$0.value.isEmpty }
        let home = try #require(
            primaries.first { $0.value.compactMap(Nemesis.slotRange).contains { $0.contains(slot) } }?.key)
        let paused = try #require(primaries.keys.sorted().first { $0 != home })
        try cluster.command(paused, "CLIENT", "PAUSE", "\(Int(hangBound.components.seconds) * 2_000)", "WRITE")
        defer { _ = try? cluster.command(paused, "CLIENT", "UNPAUSE") }

        #expect(try await writer.ask("rmall") == "ok")
        try await writer.put("k", "v-new")
        // Before, the write waited behind the removal's fences, held on the paused primary.
        try await cluster.waitUntil("the write after the removeAll reached Redis") {
            try cluster.command(home, "EXISTS", "bg:v:k") == "1"
        }
        #expect(try await writer.stats()["pending", default: 0] >= 1, "the removeAll is still under way")

        try cluster.command(paused, "CLIENT", "UNPAUSE")
        try await writer.waitFor("the removeAll landed") { $0["pending"] == 0 }
        // The removal's tombstones leave the newer write alone.
        let load = try await reader.load("k", "loaded")
        #expect(load.value == "v-new" && !load.loaded, "\(load)")
        for node in [writer, reader] { await node.quit() }
    }
}
#endif
