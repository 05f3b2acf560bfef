#if Redis
import Foundation
import Testing

/// The fleet when the network or Redis misbehaves: a connection that stops forwarding, and a
/// Redis Cluster losing a primary.
@Suite("A fleet when Redis misbehaves", .serialized)
struct FleetFailureTests {
    @Test("A stalled connection (a proxy that stops forwarding) trips the breaker; nodes keep answering")
    func stalledConnection() async throws {
        let server = try await RedisServer()
        let proxy = try StallingProxy(upstreamPort: server.port)
        let nodes = try (1...3).map {
            try FleetNode("node\($0)", port: proxy.port, options: ["timeout=200", "threshold=3", "open=500"])
        }
        for node in nodes { try await node.waitFor("subscribed") { $0["subscribed"] == 1 } }
        try await nodes[0].put("k", "v")
        try await nodes[0].waitFor("the write reached Redis") { $0["writes", default: 0] >= 1 }
        #expect(try await nodes[1].load("k", "x").value == "v")

        proxy.stall()
        // Every load below ends while the proxy still holds every byte: a call that waited on the
        // black hole would not end before `proxy.resume()` (its node would be reported hung). How
        // soon one ends (the command timeout, 200 ms) is a matter of time, which no test judges.
        for node in nodes {
            for round in 0..<5 {
                let load = try await node.load("stalled\(round)", "local")
                #expect(load.value == "local" && load.loaded, "\(node.name): \(load)")
            }
            try await node.waitFor("the circuit opened") { $0["openings", default: 0] >= 1 }
        }
        proxy.resume()
        proxy.stop()
        for node in nodes { await node.quit() }
    }

    @Test(
        "On a 3-primary Redis Cluster: keys spread over the primaries, a primary killed fails over, nothing wrong is returned"
    )
    func cluster() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let ports = cluster.nodes.map(\.port)
        let seeds = ports.dropFirst().map(String.init).joined(separator: ",")
        let nodes = try (1...3).map {
            try FleetNode("node\($0)", port: ports[0], options: ["cluster=\(seeds)", "timeout=2000"])
        }
        for node in nodes { try await node.waitFor("subscribed") { $0["subscribed"] == 1 } }
        let keys = (0..<60).map { "key\($0)" }
        for key in keys { try await nodes[0].put(key, "v-\(key)") }
        try await nodes[0].waitFor("the 60 writes reached Redis") { $0["writes", default: 0] >= keys.count }
        // Spread: every primary holds some of them.
        for port in try cluster.masterPorts() {
            let count = Int(try cluster.command(port, "DBSIZE").trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
            #expect(count > 0, "primary \(port) holds none")
        }
        for key in keys {
            let load = try await nodes[1].load(key, "x")
            #expect(load.value == "v-\(key)" && !load.loaded)
        }

        try await cluster.waitForReplication()
        let victim = try #require(try cluster.masterPorts().first)
        try await cluster.kill(master: victim)
        // During and after the failover: node 3 (cold) gets each key's value from Redis or, when
        // its slot is not served, from its loader; never anything else.
        for key in keys {
            let load = try await nodes[2].load(key, "loader-\(key)")
            #expect(load.value == "v-\(key)" || (load.loaded && load.value == "loader-\(key)"), "\(key): \(load)")
        }
        for node in nodes { await node.quit() }
    }
}
#endif
