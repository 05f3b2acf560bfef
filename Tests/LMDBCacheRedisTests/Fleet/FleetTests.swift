#if Redis
import Foundation
import Testing

/// Three machines, each a real process (`cache-test-helper node`) with its own cache directory,
/// and one real `redis-server`: what the Redis tier promises a fleet of replicas.
@Suite("A fleet of three nodes on one Redis", .serialized)
struct FleetTests {
    static func fleet(_ server: RedisServer, options: [String] = []) throws -> [FleetNode] {
        try (1...3).map { try FleetNode("node\($0)", port: server.port, options: options) }
    }

    @Test("A value set on node 1 is read by node 2 from Redis without running its loader")
    func sharedValue() async throws {
        let server = try await RedisServer()
        let nodes = try Self.fleet(server)
        try nodes[0].put("k", "v1")
        #expect(try nodes[0].waitFor { $0["writes", default: 0] >= 1 })
        let load = try nodes[1].load("k", "fromLoader")
        #expect(load.value == "v1")
        #expect(!load.loaded)
        #expect(try nodes[1].stats()["hits"] == 1)
        for node in nodes { node.quit() }
    }

    @Test("An overwrite and a tag removal on node 1 are applied on nodes 2 and 3")
    func invalidation() async throws {
        let server = try await RedisServer()
        let nodes = try Self.fleet(server)
        try nodes[0].put("a", "a1", tags: ["t"])
        try nodes[0].put("b", "b1", tags: ["t"])
        #expect(try nodes[0].waitFor { $0["writes", default: 0] >= 2 })
        for node in nodes[1...] {
            #expect(try node.load("a", "x").value == "a1")
            #expect(try node.load("b", "x").value == "b1")
        }
        let received = try nodes[1...].map { try $0.stats()["received", default: 0] }

        try nodes[0].put("a", "a2", tags: ["t"])
        for (node, before) in zip(nodes[1...], received) {
            #expect(try node.waitFor { $0["received", default: 0] >= before + 1 })
            #expect(try node.get("a") == nil, "\(node.name)'s local copy is dropped")
            let load = try node.load("a", "x")
            #expect(load.value == "a2")
            #expect(!load.loaded)
        }

        #expect(try nodes[0].removeAll(taggedWith: "t") == 2)
        for (node, before) in zip(nodes[1...], received) {
            #expect(try node.waitFor { $0["received", default: 0] >= before + 2 })
            #expect(try node.get("a") == nil)
            #expect(try node.get("b") == nil)
        }
        // Gone from Redis too: node 2's loader runs, and node 3 then reads node 2's value.
        let reloaded = try nodes[1].load("b", "reloaded")
        #expect(reloaded.value == "reloaded" && reloaded.loaded)
        #expect(try nodes[1].waitFor { $0["writes", default: 0] >= 1 })
        #expect(try nodes[2].load("b", "x").value == "reloaded")
        for node in nodes { node.quit() }
    }

    @Test("A cold key requested by all three at once, with the lease, runs the loader once")
    func lease() async throws {
        let server = try await RedisServer()
        let nodes = try Self.fleet(server)
        for round in 0..<5 {
            // The loader takes 300 ms: long enough that the others ask while it holds the lease
            // (and if one asks after, it finds the value: the loader still runs once).
            for node in nodes { try node.send("leaseload cold\(round) v\(round) 300") }
            let loads = try nodes.map { try FleetNode.parseLoad(try $0.answer(), $0.name) }
            #expect(loads.allSatisfy { $0.value == "v\(round)" })
            #expect(loads.filter(\.loaded).count == 1, "round \(round): \(loads)")
        }
        for node in nodes { node.quit() }
    }

    @Test("Redis killed: nodes answer from their local tiers within the command timeout; restarted: they reconnect, drop their memory tiers and send what they wrote meanwhile")
    func redisKilledAndRestarted() async throws {
        let server = try await RedisServer()
        // 200 ms command timeout; the circuit opens after 3 failures, for 300 ms.
        let nodes = try Self.fleet(server, options: ["timeout=200", "threshold=3", "open=300"])
        for (index, node) in nodes.enumerated() { try node.put("local\(index)", "kept\(index)") }
        #expect(try nodes.allSatisfy { node in try node.waitFor { $0["writes", default: 0] >= 1 } })

        server.kill()
        for (index, node) in nodes.enumerated() {
            #expect(try node.get("local\(index)") == "kept\(index)")
            for round in 0..<6 {
                let load = try node.load("cold\(index)-\(round)", "v")
                #expect(load.value == "v")
                #expect(load.loaded)
                // The bound is the command timeout (200 ms): a margin of ten for a loaded
                // machine; a call that waited on a dead server would take seconds.
                #expect(load.milliseconds < 2_000, "\(node.name): \(load.milliseconds) ms")
            }
            let counts = try node.stats()
            #expect(counts["failures", default: 0] >= 3)
            #expect(counts["openings", default: 0] >= 1)
        }
        // Written while Redis is down: queued.
        try nodes[0].put("late", "written-while-down")

        try await server.restart()
        for node in nodes {
            #expect(try node.waitFor { $0["drops", default: 0] >= 1 && $0["open", default: 1] == 0 })
        }
        #expect(try nodes[0].waitFor { $0["writes", default: 0] >= 2 })
        let load = try nodes[2].load("late", "x")
        #expect(load.value == "written-while-down")
        #expect(!load.loaded)
        for node in nodes { node.quit() }
    }
}
#endif
