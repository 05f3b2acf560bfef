#if Redis
import RESP
import Testing

@testable import LMDBCacheRedis

@Suite struct ClusterTopologyTests {
    private let source = RedisEndpoint(host: "10.0.0.1", port: 7000)

    private func node(_ host: String, _ port: Int64, id: String = "0123abcd") -> RESPValue {
        .array([.bulkString(Array(host.utf8)), .integer(port), .bulkString(Array(id.utf8))])
    }

    private func range(_ first: Int64, _ last: Int64, _ nodes: RESPValue...) -> RESPValue {
        .array([.integer(first), .integer(last)] + nodes)
    }

    @Test func parsesRangesPrimariesAndReplicas() throws {
        let reply = RESPValue.array([
            range(0, 5460, node("127.0.0.1", 30001), node("127.0.0.1", 30004)),
            range(5461, 10922, node("127.0.0.1", 30002), node("127.0.0.1", 30005)),
            range(10923, 16383, node("127.0.0.1", 30003), node("127.0.0.1", 30006)),
        ])
        let topology = try ClusterTopology(clusterSlots: reply, from: source)
        let first = RedisEndpoint(host: "127.0.0.1", port: 30001)
        #expect(topology.primary(forSlot: 0) == first)
        #expect(topology.primary(forSlot: 5460) == first)
        #expect(topology.primary(forSlot: 5461) == RedisEndpoint(host: "127.0.0.1", port: 30002))
        #expect(topology.primary(forSlot: 16383) == RedisEndpoint(host: "127.0.0.1", port: 30003))
        #expect(topology.primary(forSlot: 16384) == nil)
        #expect(topology.primary(forSlot: -1) == nil)
        #expect(topology.replicas[first] == [RedisEndpoint(host: "127.0.0.1", port: 30004)])
        #expect(topology.coveredSlotCount == 16384)
        #expect(topology.endpoints.count == 6)
    }

    @Test func sameNodeOwningSeveralRangesAndMetadataFields() throws {
        let withMetadata = RESPValue.array([
            .bulkString(Array("127.0.0.1".utf8)), .integer(30001), .bulkString(Array("id".utf8)),
            .map([RESPPair(key: .bulkString(Array("hostname".utf8)), value: .bulkString(Array("a".utf8)))]),
        ])
        let reply = RESPValue.array([range(0, 9, withMetadata), range(100, 100, withMetadata)])
        let topology = try ClusterTopology(clusterSlots: reply, from: source)
        #expect(topology.primaries == [RedisEndpoint(host: "127.0.0.1", port: 30001)])
        #expect(topology.coveredSlotCount == 11)
        #expect(topology.primary(forSlot: 50) == nil)
    }

    @Test func emptyUnknownOrNullHostMeansTheHostAsked() throws {
        for host: RESPValue in [.bulkString([]), .bulkString(Array("?".utf8)), .bulkString(nil), .null] {
            let reply = RESPValue.array([range(0, 16383, .array([host, .integer(30001)]))])
            let topology = try ClusterTopology(clusterSlots: reply, from: source)
            #expect(topology.primary(forSlot: 7) == RedisEndpoint(host: "10.0.0.1", port: 30001))
        }
    }

    @Test func emptyReplyIsAnEmptyTopology() throws {
        let topology = try ClusterTopology(clusterSlots: .array([]), from: source)
        #expect(topology.isEmpty)
        #expect(topology.primary(forSlot: 0) == nil)
    }

    /// Replies `CLUSTER SLOTS` must not be taken for a topology (a typed constant: as a literal
    /// argument list, the type checker gives up on it on a loaded machine).
    static let malformedReplies: [RESPValue] = [
        .bulkString(Array("x".utf8)),
        .array(nil),
        .error(Array("ERR This instance has cluster support disabled".utf8)),
        .array([.integer(0)]),
        .array([.array([.integer(0), .integer(10)])]),
        .array([.array([.integer(5), .integer(4), .array([.bulkString(Array("h".utf8)), .integer(1)])])]),
        .array([.array([.integer(0), .integer(16384), .array([.bulkString(Array("h".utf8)), .integer(1)])])]),
        .array([.array([.integer(-1), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(1)])])]),
        .array([
            .array([.bulkString(Array("0".utf8)), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(1)])])
        ]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(0)])])]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(65536)])])]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(Int64.min)])])]),
        .array([
            .array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8)), .bulkString(Array("80".utf8))])])
        ]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8))])])]),
        .array([.array([.integer(0), .integer(3), .array([.integer(1), .integer(80)])])]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString([0x68, 0x0A]), .integer(80)])])]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString([0xFF, 0xFE]), .integer(80)])])]),
        .array([
            .array([.integer(0), .integer(3), .array([.bulkString(Array(repeating: 0x61, count: 256)), .integer(80)])])
        ]),
        .array([.array([.integer(0), .integer(3), .array([.bulkString(Array("h".utf8)), .integer(80)]), .integer(1)])]),
        // Overlapping ranges.
        .array([
            .array([.integer(0), .integer(10), .array([.bulkString(Array("a".utf8)), .integer(80)])]),
            .array([.integer(10), .integer(20), .array([.bulkString(Array("b".utf8)), .integer(80)])]),
        ]),
    ]

    @Test(arguments: malformedReplies)
    func refusesMalformedReplies(_ reply: RESPValue) {
        #expect(throws: RedisClientError.self) { try ClusterTopology(clusterSlots: reply, from: source) }
    }

    @Test func assigningASlotMovesOnlyThatSlot() throws {
        let reply = RESPValue.array([range(0, 16383, node("127.0.0.1", 30001))])
        var topology = try ClusterTopology(clusterSlots: reply, from: source)
        let other = RedisEndpoint(host: "127.0.0.1", port: 30002)
        topology.assign(slot: 3999, to: other)
        #expect(topology.primary(forSlot: 3999) == other)
        #expect(topology.primary(forSlot: 3998) == RedisEndpoint(host: "127.0.0.1", port: 30001))
        #expect(topology.primaries.count == 2)
    }
}

@Suite struct ClusterRedirectionTests {
    private let source = RedisEndpoint(host: "10.0.0.1", port: 7000)

    private func parse(_ message: String) -> ClusterRedirection? {
        ClusterRedirection(errorMessage: Array(message.utf8), from: source)
    }

    @Test func movedAndAsk() {
        let target = RedisEndpoint(host: "127.0.0.1", port: 6381)
        #expect(parse("MOVED 3999 127.0.0.1:6381") == ClusterRedirection(kind: .moved, slot: 3999, endpoint: target))
        #expect(parse("ASK 3999 127.0.0.1:6381") == ClusterRedirection(kind: .ask, slot: 3999, endpoint: target))
        #expect(parse("MOVED 0 ::1:6379")?.endpoint == RedisEndpoint(host: "::1", port: 6379))
        #expect(parse("MOVED 16383 :6381")?.endpoint == RedisEndpoint(host: "10.0.0.1", port: 6381))
        #expect(parse("ASK 1 ?:6381")?.endpoint == RedisEndpoint(host: "10.0.0.1", port: 6381))
    }

    @Test(arguments: [
        "ERR unknown command", "MOVED", "MOVED 3999", "MOVED 3999 127.0.0.1", "MOVED 16384 127.0.0.1:6381",
        "MOVED -1 127.0.0.1:6381", "MOVED 3999 127.0.0.1:0", "MOVED 3999 127.0.0.1:65536",
        "MOVED 3999 127.0.0.1:99999999999999999999999", "MOVED 3999 127.0.0.1:", "MOVED 3999  127.0.0.1:6381",
        "MOVED 3999 127.0.0.1:6381 extra", "moved 3999 127.0.0.1:6381", "ASKING 3999 127.0.0.1:6381",
        "MOVED 39a9 127.0.0.1:6381", "MOVED 3999 127.0.0.1:+6381",
    ])
    func otherErrorsAreNotRedirections(_ message: String) {
        #expect(parse(message) == nil)
    }
}
#endif
