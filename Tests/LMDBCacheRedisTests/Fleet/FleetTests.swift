#if Redis
import Foundation
import Testing

/// Three machines, each a real process (`cache-test-helper node`) with its own cache directory,
/// and one real `redis-server`: what the Redis tier promises a fleet of replicas.
@Suite("A fleet of three nodes on one Redis", .serialized)
struct FleetTests {
    /// Three nodes on `server`, each subscribed to the others' changes.
    static func fleet(_ server: RedisServer, options: [String] = []) async throws -> [FleetNode] {
        let nodes = try (1...3).map { try FleetNode("node\($0)", port: server.port, options: options) }
        for node in nodes {
            guard try await node.waitFor("subscribed", { $0["subscribed"] == 1 }) else {
                throw FleetNode.Failure(description: "\(node.name) did not subscribe")
            }
        }
        return nodes
    }

    @Test("A value set on node 1 is read by node 2 from Redis without running its loader")
    func sharedValue() async throws {
        let server = try await RedisServer()
        let nodes = try await Self.fleet(server)
        try await nodes[0].put("k", "v1")
        try await nodes[0].waitFor("the write reached Redis") { $0["writes", default: 0] >= 1 }
        let load = try await nodes[1].load("k", "fromLoader")
        #expect(load.value == "v1")
        #expect(!load.loaded)
        #expect(try await nodes[1].stats()["hits"] == 1)
        for node in nodes { await node.quit() }
    }

    @Test("An overwrite and a tag removal on node 1 are applied on nodes 2 and 3")
    func invalidation() async throws {
        let server = try await RedisServer()
        let nodes = try await Self.fleet(server)
        try await nodes[0].put("a", "a1", tags: ["t"])
        try await nodes[0].put("b", "b1", tags: ["t"])
        try await nodes[0].waitFor("the two writes reached Redis") { $0["writes", default: 0] >= 2 }
        for node in nodes[1...] {
            #expect(try await node.load("a", "x").value == "a1")
            #expect(try await node.load("b", "x").value == "b1")
        }
        var received: [Int] = []
        for node in nodes[1...] { received.append(try await node.stats()["received", default: 0]) }

        try await nodes[0].put("a", "a2", tags: ["t"])
        for (node, before) in zip(nodes[1...], received) {
            try await node.waitFor("heard of the overwrite") { $0["received", default: 0] >= before + 1 }
            #expect(try await node.get("a") == nil, "\(node.name)'s local copy is dropped")
            let load = try await node.load("a", "x")
            #expect(load.value == "a2")
            #expect(!load.loaded)
        }

        #expect(try await nodes[0].removeAll(taggedWith: "t") == 2)
        for (node, before) in zip(nodes[1...], received) {
            try await node.waitFor("heard of the tag removal") { $0["received", default: 0] >= before + 2 }
            #expect(try await node.get("a") == nil)
            #expect(try await node.get("b") == nil)
        }
        // Gone from Redis too: node 2's loader runs, and node 3 then reads node 2's value.
        let reloaded = try await nodes[1].load("b", "reloaded")
        #expect(reloaded.value == "reloaded" && reloaded.loaded)
        try await nodes[1].waitFor("the reloaded value reached Redis") { $0["writes", default: 0] >= 1 }
        #expect(try await nodes[2].load("b", "x").value == "reloaded")
        for node in nodes { await node.quit() }
    }

    @Test("A cold key requested by all three at once, with the lease, runs the loader once")
    func lease() async throws {
        let server = try await RedisServer()
        let nodes = try await Self.fleet(server)
        for round in 0..<5 {
            // The loader takes 300 ms, so that the others likely ask while it holds the lease; the
            // verdict does not depend on it: one that asks after finds the value (the loader still
            // runs once), and a waiter waits for the holder as long as a hang.
            for node in nodes { try node.send("leaseload cold\(round) v\(round) 300") }
            var loads: [FleetNode.Load] = []
            for node in nodes { loads.append(try FleetNode.parseLoad(try await node.answer(), node.name)) }
            #expect(loads.allSatisfy { $0.value == "v\(round)" })
            #expect(loads.filter(\.loaded).count == 1, "round \(round): \(loads)")
        }
        for node in nodes { await node.quit() }
    }

    @Test(
        "Redis killed: nodes answer from their local tiers and loaders while it is down; restarted: they reconnect, drop their memory tiers and send what they wrote meanwhile"
    )
    func redisKilledAndRestarted() async throws {
        let server = try await RedisServer()
        // 200 ms command timeout; the circuit opens after 3 failures, for 300 ms.
        let nodes = try await Self.fleet(server, options: ["timeout=200", "threshold=3", "open=300"])
        for (index, node) in nodes.enumerated() { try await node.put("local\(index)", "kept\(index)") }
        for node in nodes { try await node.waitFor("the write reached Redis") { $0["writes", default: 0] >= 1 } }

        server.kill()
        // Every load ends with Redis still dead, from the loader: none waits for the server to
        // come back. How soon one ends (the command timeout, 200 ms) is a matter of time, which no
        // test judges; a call that never ended would have its node reported hung.
        for (index, node) in nodes.enumerated() {
            #expect(try await node.get("local\(index)") == "kept\(index)")
            for round in 0..<6 {
                let load = try await node.load("cold\(index)-\(round)", "v")
                #expect(load.value == "v")
                #expect(load.loaded)
            }
            let counts = try await node.stats()
            #expect(counts["failures", default: 0] >= 3)
            #expect(counts["openings", default: 0] >= 1)
        }
        // Written while Redis is down: queued.
        try await nodes[0].put("late", "written-while-down")

        try await server.restart()
        for node in nodes {
            try await node.waitFor("reconnected: the memory tier dropped, the circuit closed") {
                $0["drops", default: 0] >= 1 && $0["open", default: 1] == 0
            }
        }
        try await nodes[0].waitFor("the write made while down reached Redis") { $0["writes", default: 0] >= 2 }
        let load = try await nodes[2].load("late", "x")
        #expect(load.value == "written-while-down")
        #expect(!load.loaded)
        for node in nodes { await node.quit() }
    }
}
#endif
