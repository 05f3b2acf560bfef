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

    /// A cluster of three primaries with one of them, not the home of `bg:v:k`, paused for
    /// writes (scripts included) for longer than the hang bound; a writer node with a command
    /// timeout past it (subscribed), so a removal waits on the paused primary rather than fail.
    struct HeldRemoval {
        let cluster: RedisCluster
        let writer: FleetNode
        let primaries: [Int]
        let paused: Int
        let homeSlots: [ClosedRange<Int>]

        static func start(_ name: String) async throws -> HeldRemoval {
            let cluster = try await RedisCluster.start()
            let writer = try node(name, cluster)
            _ = try await writer.waitFor("subscribed") { $0["subscribed"] == 1 }
            let slot = HashSlot.slot(of: Array("bg:v:k".utf8))
            let primaries = try cluster.roles(askingPort: cluster.nodes[0].port).filter { !$0.value.isEmpty }
            let home = try #require(
                primaries.first { $0.value.compactMap(Nemesis.slotRange).contains { $0.contains(slot) } })
            let paused = try #require(primaries.keys.sorted().first { $0 != home.key })
            return HeldRemoval(
                cluster: cluster, writer: writer, primaries: Array(primaries.keys), paused: paused,
                homeSlots: home.value.compactMap(Nemesis.slotRange))
        }

        /// A node on the cluster, subscribed.
        static func node(_ name: String, _ cluster: RedisCluster) throws -> FleetNode {
            let ports = cluster.nodes.map(\.port)
            let seeds = ports.dropFirst().map(String.init).joined(separator: ",")
            return try FleetNode(name, port: ports[0], options: ["cluster=\(seeds)", "timeout=600000", "namespace=bg"])
        }

        /// A key beginning with `prefix` whose value lives on `k`'s primary (not paused).
        func homeKey(_ prefix: String) -> String {
            (0...).lazy.map { "\(prefix)\($0)" }.first { name in
                let slot = HashSlot.slot(of: Array("bg:v:\(name)".utf8))
                return homeSlots.contains { $0.contains(slot) }
            }!
        }

        func pause() throws {
            _ = try cluster.command(paused, "CLIENT", "PAUSE", "\(Int(hangBound.components.seconds) * 2_000)", "WRITE")
        }

        func unpause() throws {
            _ = try cluster.command(paused, "CLIENT", "UNPAUSE")
        }

        /// Scripts the primaries have run (EVAL and EVALSHA calls, from INFO commandstats).
        func scriptCalls() throws -> Int {
            var calls = 0
            for port in primaries {
                for line in try cluster.command(port, "INFO", "commandstats").split(whereSeparator: \.isNewline)
                where line.hasPrefix("cmdstat_eval:") || line.hasPrefix("cmdstat_evalsha:") {
                    let field = line.split(separator: ",").first { $0.contains("calls=") }
                    calls += field.flatMap { Int($0.split(separator: "=").last ?? "") } ?? 0
                }
            }
            return calls
        }

        func stop() async {
            _ = try? unpause()
            await writer.quit()
            cluster.stop()
        }
    }

    @Test("A burst of removeAlls while one is held on a paused primary runs as two removals, and the newest one's effect stays")
    func removeAllBurstRunsAsTwo() async throws {
        let held = try await HeldRemoval.start("burst-writer")
        let writer = held.writer
        let gone = held.homeKey("gone")
        let before = try held.scriptCalls()
        try held.pause()
        // Each removeAll is taken off the queue before the next is made: the write queued after
        // it lands (on the key's own primary, not paused) only once the writer has taken both.
        for index in 0..<5 {
            #expect(try await writer.ask("rmall") == "ok")
            if index == 2 { try await writer.put(gone, "made-before-the-last-removeAll") }
            try await writer.put("k", "v\(index)")
            _ = try await writer.waitFor("write \(index) landed") { $0["writes", default: 0] >= index + 1 + (index >= 2 ? 1 : 0) }
        }
        try held.unpause()
        _ = try await writer.waitFor("the removals landed") { $0["pending"] == 0 }
        // A removal of everything fences all 16,384 slots; five in a row did so five times.
        let calls = try held.scriptCalls() - before
        #expect(calls < 3 * 16_384, "\(calls) scripts: more than two removals ran")
        #expect(try await writer.stats()["dropped"] == 0)
        let reader = try HeldRemoval.node("burst-reader", held.cluster)
        _ = try await reader.waitFor("subscribed") { $0["subscribed"] == 1 }
        let kept = try await reader.load("k", "loaded")
        #expect(kept.value == "v4" && !kept.loaded, "the write made after the last removeAll stays: \(kept)")
        let removed = try await reader.load(gone, "loaded")
        #expect(removed.loaded, "the newest removeAll removed what an older one would have: \(removed)")
        await reader.quit()
        await held.stop()
    }

    @Test("Get-or-loads while a removeAll is held load once: the load's value waits for the removal instead of being superseded by the value it removes")
    func loadsDuringAHeldRemoveAllLoadOnce() async throws {
        let held = try await HeldRemoval.start("storm-writer")
        let writer = held.writer
        let other = held.homeKey("m")
        try await writer.put("k", "old")
        _ = try await writer.waitFor("the old value landed") { $0["pending"] == 0 && $0["writes"] == 1 }
        try held.pause()
        #expect(try await writer.ask("rmall") == "ok")
        var loads = 0
        for index in 0..<20 {
            if try await writer.load("k", "loaded").loaded { loads += 1 }
            // A write queued after the load's value, to the same primary, has landed: the load's
            // value was sent (and superseded, and dropped here) before, or is held.
            try await writer.put(other, "\(index)")
            _ = try await writer.waitFor("write \(index) landed") { $0["writes", default: 0] >= 2 + index }
        }
        #expect(loads == 1, "the loader ran \(loads) times for 20 get-or-loads")
        try held.unpause()
        _ = try await writer.waitFor("the removal and the held value landed") { $0["pending"] == 0 }
        #expect(try await writer.stats()["dropped"] == 0)
        await held.stop()
    }
}
#endif
