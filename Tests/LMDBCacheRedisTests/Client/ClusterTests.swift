#if Redis
import Logging
import RESP
import Testing

@testable import LMDBCacheRedis

/// The cluster client against a real cluster of three primaries and three replicas: routing by
/// slot, pipelines over several nodes, `ASK` and `MOVED` during a slot migration made by hand,
/// failover of a killed primary, and a call that cannot reach any node.
///
/// Calls expected to answer get ``hangBound`` as their timeout, and the suite's time limit is a
/// backstop for a hang: a busy machine makes a test slower, never fail.
@Suite(.serialized, .timeLimit(.minutes(30))) struct ClusterTests {
    private let timeout = hangBound

    private func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

    private func key(_ index: Int) -> [UInt8] { bytes("key-\(index)") }
    private func value(_ index: Int) -> [UInt8] { bytes("value-\(index)") }

    private func set(_ key: [UInt8], _ value: [UInt8]) -> RedisCommand {
        RedisCommand([bytes("SET"), key, value], key: key)
    }

    private func get(_ key: [UInt8]) -> RedisCommand {
        RedisCommand([bytes("GET"), key], key: key)
    }

    /// A cluster client over `seeds` whose nodes are real connection pools.
    private func makeClient(seeds: [RedisEndpoint]) throws -> RedisClusterClient {
        let logger = Logger(label: "test.cluster")
        let connector = try RedisConnector(configuration: RedisClientConfiguration(endpoints: seeds))
        return RedisClusterClient(seeds: seeds, minimumRefreshInterval: .milliseconds(100), logger: logger) {
            RedisConnectionPool(connector: connector, endpoint: $0, logger: logger)
        }
    }

    /// Sets keys 0..<count through `client`, 100 per pipeline.
    private func setKeys(_ count: Int, through client: RedisClusterClient) async throws {
        for start in stride(from: 0, to: count, by: 100) {
            let range = start..<min(start + 100, count)
            let replies = try await client.execute(range.map { set(key($0), value($0)) }, timeout: timeout)
            #expect(replies == Array(repeating: .simpleString(bytes("OK")), count: range.count))
        }
    }

    /// Reads keys 0..<count through `client`, 100 per pipeline: the number of keys read back
    /// correctly. A call that throws or an error reply counts as not read; any other reply that
    /// is not the value set is recorded as a test failure (a wrong value).
    private func readKeys(_ count: Int, through client: RedisClusterClient) async -> Int {
        var correct = 0
        for start in stride(from: 0, to: count, by: 100) {
            let range = Array(start..<min(start + 100, count))
            guard let replies = try? await client.execute(range.map { get(key($0)) }, timeout: timeout) else {
                continue
            }
            #expect(replies.count == range.count)
            for (index, reply) in zip(range, replies) {
                if case .error = reply { continue }
                #expect(reply == .bulkString(value(index)), "key-\(index)")
                if reply == .bulkString(value(index)) { correct += 1 }
            }
        }
        return correct
    }

    @Test func keysSpreadOverThreeMastersAndReadBack() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let client = try makeClient(seeds: [cluster.nodes[0].endpoint])
        defer { Task { await client.close() } }

        try await setKeys(1000, through: client)
        let masters = try cluster.masterPorts()
        #expect(masters.count == 3)
        let sizes = try masters.map { try cluster.command($0, "DBSIZE") }.map { Int($0) ?? -1 }
        #expect(sizes.allSatisfy { $0 > 0 }, "keys per primary: \(sizes)")
        #expect(sizes.reduce(0, +) == 1000)
        // Each key is on the primary its slot belongs to.
        let slot = HashSlot.slot(of: key(7))
        let owner = try #require(client.topology?.primary(forSlot: slot))
        #expect(try cluster.command(owner.port, "CLUSTER", "COUNTKEYSINSLOT", "\(slot)") != "0")
        #expect(await readKeys(1000, through: client) == 1000)
    }

    @Test func pipelineMixingSlotsAndKeylessCommandsKeepsItsOrder() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let client = try makeClient(seeds: cluster.nodes.map(\.endpoint))
        defer { Task { await client.close() } }
        try await client.refreshTopology()
        let topology = try #require(client.topology)
        // Keys on three different primaries.
        var byPrimary: [RedisEndpoint: [UInt8]] = [:]
        for index in 0..<1000 where byPrimary.count < 3 {
            let candidate = key(index)
            if let owner = topology.primary(forSlot: HashSlot.slot(of: candidate)), byPrimary[owner] == nil {
                byPrimary[owner] = candidate
            }
        }
        let keys = Array(byPrimary.values)
        #expect(keys.count == 3)

        let commands: [RedisCommand] = [
            set(keys[0], bytes("a")), get(keys[0]),
            set(keys[1], bytes("b")), RedisCommand([bytes("PING")]), get(keys[1]),
            RedisCommand([bytes("INCR"), keys[2]], key: keys[2]), RedisCommand([bytes("INCR"), keys[2]], key: keys[2]),
            get(bytes("{\(String(decoding: keys[0], as: UTF8.self))}missing")),
            RedisCommand([bytes("LPUSH"), keys[1], bytes("x")], key: keys[1]),
        ]
        let replies = try await client.execute(commands, timeout: timeout)
        #expect(replies.count == commands.count)
        #expect(replies[0] == .simpleString(bytes("OK")))
        #expect(replies[1] == .bulkString(bytes("a")))
        #expect(replies[2] == .simpleString(bytes("OK")))
        #expect(replies[3] == .simpleString(bytes("PONG")))
        #expect(replies[4] == .bulkString(bytes("b")))
        #expect(replies[5] == .integer(1))
        #expect(replies[6] == .integer(2))
        #expect(replies[7] == .bulkString(nil))
        // An ordinary error reply is a value in its place, not a failure of the call.
        guard case .error(let message) = replies[8] else {
            Issue.record("LPUSH on a string answered \(replies[8])")
            return
        }
        #expect(message.starts(with: bytes("WRONGTYPE")))
    }

    @Test func followsAskDuringAMigrationAndMovedAfterIt() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let client = try makeClient(seeds: [cluster.nodes[0].endpoint])
        defer { Task { await client.close() } }

        let movingKey = bytes("moving-key")
        let sibling = bytes("{moving-key}sibling")  // same slot, by its hash tag
        let slot = HashSlot.slot(of: movingKey)
        #expect(HashSlot.slot(of: sibling) == slot)
        #expect(
            try await client.execute([set(movingKey, bytes("v1"))], timeout: timeout) == [.simpleString(bytes("OK"))])
        let source = try #require(client.topology?.primary(forSlot: slot))
        let masters = try cluster.masterPorts()
        let target = try #require(masters.first { $0 != source.port })
        let sourceID = try cluster.nodeID(source.port)
        let targetID = try cluster.nodeID(target)

        // Migration under way: a key the source does not hold is answered with ASK.
        try cluster.command(target, "CLUSTER", "SETSLOT", "\(slot)", "IMPORTING", sourceID)
        try cluster.command(source.port, "CLUSTER", "SETSLOT", "\(slot)", "MIGRATING", targetID)
        #expect(try await client.execute([set(sibling, bytes("v2"))], timeout: timeout) == [.simpleString(bytes("OK"))])
        #expect(try cluster.command(target, "CLUSTER", "COUNTKEYSINSLOT", "\(slot)") == "1")
        #expect(try cluster.command(source.port, "CLUSTER", "COUNTKEYSINSLOT", "\(slot)") == "1")
        let duringMigration = try await client.execute([get(movingKey), get(sibling)], timeout: timeout)
        #expect(duringMigration == [.bulkString(bytes("v1")), .bulkString(bytes("v2"))])
        #expect(client.topology?.primary(forSlot: slot) == source)  // ASK leaves the slot map alone

        // Migration done: the client's map is stale, the source answers MOVED.
        try cluster.command(source.port, "MIGRATE", "127.0.0.1", "\(target)", "", "0", "5000", "KEYS", "moving-key")
        for master in [target, source.port] + masters.filter({ $0 != target && $0 != source.port }) {
            try cluster.command(master, "CLUSTER", "SETSLOT", "\(slot)", "NODE", targetID)
        }
        #expect(client.topology?.primary(forSlot: slot) == source)
        let afterMigration = try await client.execute([get(sibling), get(movingKey)], timeout: timeout)
        #expect(afterMigration == [.bulkString(bytes("v2")), .bulkString(bytes("v1"))])
        #expect(client.topology?.primary(forSlot: slot)?.port == target)
        #expect(try cluster.command(source.port, "CLUSTER", "COUNTKEYSINSLOT", "\(slot)") == "0")
    }

    @Test func killedMasterNeverYieldsAWrongValueAndItsKeysComeBack() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let client = try makeClient(seeds: cluster.nodes.map(\.endpoint))
        defer { Task { await client.close() } }
        try await setKeys(1000, through: client)
        try await cluster.waitForReplication()
        let victim = try #require(try cluster.masterPorts().first)
        #expect(client.topology?.primaries.contains { $0.port == victim } == true)

        try cluster.killProcess(victim)
        // While the cluster detects the failure and promotes the replica: right values or throws.
        _ = await readKeys(1000, through: client)
        try await cluster.waitForFailover(of: victim)
        _ = await readKeys(1000, through: client)

        // Every key is read back again.
        await waitFor("every key was read back after the failover") { await readKeys(1000, through: client) == 1000 }
        #expect(client.topology?.primaries.contains { $0.port == victim } == false)
    }

    @Test func callToABlackHoledClusterEndsAtItsTimeout() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let proxy = try StallingProxy(upstreamPort: cluster.nodes[0].port)
        defer { proxy.stop() }
        proxy.stall()
        let client = try makeClient(seeds: [RedisEndpoint(host: "127.0.0.1", port: proxy.port)])
        defer { Task { await client.close() } }

        await #expect(throws: RedisClientError.timedOut) {
            try await client.execute([get(bytes("k"))], timeout: .milliseconds(300))
        }
        proxy.resume()
        // Once the network forwards again, the client learns the topology and answers. (A poll:
        // a call that fails here, on a connection the stall spoiled, is only tried again.)
        let reply = Recorder<[RESPValue]>()
        await waitFor("the client answered once the network forwarded again") {
            guard
                let answer = try? await client.execute(
                    [set(bytes("k"), bytes("v")), get(bytes("k"))], timeout: timeout)
            else { return false }
            reply.record(answer)
            return true
        }
        #expect(reply.all.last == [.simpleString(bytes("OK")), .bulkString(bytes("v"))])
    }
}
#endif
