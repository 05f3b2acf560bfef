#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
@testable import LMDBCacheRedis
import RESP
import Testing

/// What the tier does while Redis is there but cannot serve (still loading its data after a
/// restart, a replica after a failover) and what a write that cannot land leaves on the machine
/// that made it. Real `redis-server` processes, restarted with a slow load (`key-load-delay`)
/// that the test ends when its checks are done.
@Suite("Redis server states", .serialized)
struct ServerStateTests {
    typealias Machine = RemoteTierTests

    @Test("While Redis loads its data, lookups fail fast and open the circuit, writes are refused and land once it is done")
    func loadingWithPassword() async throws {
        let server = try await RedisServer(password: "secret")
        defer { server.stop() }
        let (one, d1) = try await Machine.machine(server, threshold: 3)
        let (two, d2) = try await Machine.machine(server, threshold: 3)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("v1", forKey: "k")
        await Machine.wait(two, "machine two heard of v1") { $0.changesReceived >= 1 }

        try await server.restartLoading()
        // Error replies, not timeouts: each a failure, and three in a row open the circuit (an
        // answer is not a success when it says Redis cannot serve).
        for index in 0..<3 {
            #expect(try await two.value(forKey: "other\(index)", load: { "loaded" }) == "loaded")
        }
        let during = try #require(two.statistics.remote)
        #expect(during.failures >= 3)
        #expect(during.circuitOpenings >= 1, "-LOADING replies to lookups opened the circuit")
        #expect(during.hits == 0)

        one.insert("v2", forKey: "k")
        await Machine.wait(one, "Redis refused the write with -LOADING") { $0.writesRefused >= 1 }
        #expect(try server.isLoading(), "the checks ran while Redis was loading")
        try await server.finishLoading()
        await Machine.wait(one, "the write landed") { $0.pendingWrites == 0 && $0.writes >= 2 }
        await Machine.wait(two, "machine two heard of v2") { $0.changesReceived >= 2 }
        // Its circuit closes on the first lookup it lets through once Redis serves again.
        _ = await waitFor("machine two's circuit closed again") {
            _ = try? await two.value(forKey: UUID().uuidString, load: { "probe" })
            return two.statistics.remote?.isCircuitOpen == false
        }
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "v2")
        one.close()
        two.close()
    }

    @Test("Without a password, a Redis still loading takes connections: the subscription comes back and writes are refused, not failed")
    func loadingWithoutPassword() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let (one, d1) = try await Machine.machine(server, threshold: 1_000)
        defer { d1.remove() }
        let drops = one.statistics.remote?.memoryTierDrops ?? 0

        try await server.restartLoading()
        // The subscriber's connection closed with the old process; its new one is made while
        // Redis loads (PING refused with -LOADING is an answer), and the cache drops its memory
        // tier for the changes it may have missed.
        await Machine.wait(one, "resubscribed while Redis loads") { $0.isSubscribed && $0.memoryTierDrops > drops }
        // The subscriber's health-check PINGs are refused with -LOADING (nothing else asks Redis
        // anything here): answers, so the subscription stands, and nothing more is dropped.
        let resubscribed = try #require(one.statistics.remote)
        let refused = try Self.loadingRefusals(server)
        _ = await waitFor("two health-check PINGs refused") { ((try? Self.loadingRefusals(server)) ?? 0) >= refused + 2 }
        #expect(one.statistics.remote?.memoryTierDrops == resubscribed.memoryTierDrops)
        #expect(one.statistics.remote?.isSubscribed == true)
        one.insert("v1", forKey: "k")
        await Machine.wait(one, "Redis refused the write with -LOADING") { $0.writesRefused >= 1 }
        #expect(try server.isLoading(), "the checks ran while Redis was loading")
        try await server.finishLoading()
        await Machine.wait(one, "the write landed") { $0.pendingWrites == 0 && $0.writes >= 1 }
        one.close()
    }

    /// How many commands `server` refused with `-LOADING` so far (`INFO errorstats`).
    static func loadingRefusals(_ server: RedisServer) throws -> Int {
        let line = try server.cli(["INFO", "errorstats"]).split(whereSeparator: \.isNewline)
            .first { $0.hasPrefix("errorstat_LOADING:count=") }
        return line.flatMap { Int($0.dropFirst("errorstat_LOADING:count=".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    @Test("A value the full write queue drops leaves the writer's tiers too (its key is owed a removal)")
    func queueOverflowDropsTheWritersCopy() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let (one, d1) = try await Machine.machine(server, timeout: .milliseconds(100), threshold: 1) {
            $0.writeQueueLimit = 1
            $0.openDuration = .seconds(600)
        }
        defer { d1.remove() }
        server.pause()
        defer { server.resume() }
        // The first write times out and opens the circuit: later writes wait in the queue.
        one.insert("x", forKey: "x")
        await Machine.wait(one, "the circuit opened") { $0.circuitOpenings >= 1 }
        one.insert("v1", forKey: "k")
        #expect(one.value(forKey: "k") == "v1")
        one.insert("v2", forKey: "j")
        await Machine.wait(one, "the queue dropped k's write") { $0.writesDropped >= 1 }
        await Machine.wait(one, "machine one dropped its copy of k") { $0.changesReceived >= 1 }
        #expect(one.value(forKey: "k") == nil)
        #expect(one.value(forKey: "j") == "v2")
        server.resume()
        one.close()
    }

    @Test("A value that cannot land is dropped from the writer's own tiers too: every machine then loads the same value")
    func droppedWriteLeavesNoCopyOnTheWriter() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let (one, d1) = try await Machine.machine(server, threshold: 1_000)
        let (two, d2) = try await Machine.machine(server, threshold: 1_000)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("v1", forKey: "k")
        await Machine.wait(two, "machine two heard of v1") { $0.changesReceived >= 1 }
        _ = try server.cli(["CONFIG", "SET", "maxmemory-policy", "noeviction"])
        _ = try server.cli(["CONFIG", "SET", "maxmemory", "1"])
        one.insert("v2", forKey: "k")
        await Machine.wait(one, "the refused write was replaced by a removal that landed") {
            $0.writesRefused >= 1 && $0.pendingWrites == 0
        }
        await Machine.wait(two, "machine two heard of the removal") { $0.changesReceived >= 2 }
        // The writer applies its own drop as a change (none of its own changes come back to it).
        await Machine.wait(one, "machine one dropped its copy") { $0.changesReceived >= 1 }
        #expect(one.value(forKey: "k") == nil)
        #expect(try await one.value(forKey: "k", load: { "loaded" }) == "loaded")
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "loaded")
        _ = try server.cli(["CONFIG", "SET", "maxmemory", "0"])
        one.close()
        two.close()
    }

    @Test("A replica's -READONLY closes the connection it came on: the next command connects again")
    func readOnlyReconnects() async throws {
        let server = try await RedisServer()
        let primary = try await RedisServer()
        defer {
            server.stop()
            primary.stop()
        }
        let pool = try RedisConnectionPool(configuration: server.configuration(poolSize: 1), logger: testLogger)
        func clientID() async throws -> RESPValue {
            try await pool.execute([RedisCommand("CLIENT", bytes("ID"))], timeout: hangBound)[0]
        }
        let first = try await clientID()
        #expect(try await clientID() == first, "one connection, kept")
        _ = try server.cli(["REPLICAOF", "127.0.0.1", "\(primary.port)"])
        let refused = try await pool.execute([RedisCommand("SET", bytes("k"), bytes("v"), key: bytes("k"))], timeout: hangBound)
        #expect(RedisConnectionPool.isReadOnlyRefusal(refused[0]))
        let after = try await clientID()
        #expect(after != first, "a new connection after -READONLY")
        await pool.close()
    }

    @Test("The tier's scripts go by digest (EVALSHA), equal to Redis's own, and a flushed script cache costs one resend")
    func scriptsByDigest() async throws {
        #expect(ScriptDigest.hex(ScriptDigest.sha1(Array("abc".utf8))) == Array("a9993e364706816aba3e25717850c26c9cd0d89d".utf8))
        #expect(ScriptDigest.hex(ScriptDigest.sha1([])) == Array("da39a3ee5e6b4b0d3255bfef95601890afd80709".utf8))
        // 56 bytes: the padding takes a block of its own.
        let blockEdge = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(ScriptDigest.hex(ScriptDigest.sha1(blockEdge)) == Array("84983e441c3bd26ebaae4aa1f95129e5e54670f1".utf8))
        let long = Array(repeating: UInt8(ascii: "a"), count: 1_000_000)
        #expect(ScriptDigest.hex(ScriptDigest.sha1(long)) == Array("34aa973cd4c4daa4f61eeb2bdbad27316534016f".utf8))

        let server = try await RedisServer()
        defer { server.stop() }
        for script in [RedisScripts.write, RedisScripts.tombstone, RedisScripts.tag, RedisScripts.release] {
            let loaded = try server.cli(["SCRIPT", "LOAD", String(decoding: script, as: UTF8.self)])
            #expect(loaded.trimmingCharacters(in: .whitespacesAndNewlines) == String(decoding: ScriptDigest.hex(ScriptDigest.sha1(script)), as: UTF8.self))
        }
        let (one, d1) = try await Machine.machine(server, threshold: 1_000)
        let (two, d2) = try await Machine.machine(server, threshold: 1_000)
        defer {
            d1.remove()
            d2.remove()
        }
        one.insert("v1", forKey: "k", tags: ["t"])
        await Machine.wait(two, "machine two heard of v1") { $0.changesReceived >= 1 }
        _ = try server.cli(["SCRIPT", "FLUSH"])
        one.insert("v2", forKey: "k", tags: ["t"])
        await Machine.wait(two, "machine two heard of v2") { $0.changesReceived >= 2 }
        #expect(try await two.value(forKey: "k", load: { "loaded" }) == "v2")
        let stats = try server.cli(["INFO", "commandstats"])
        #expect(stats.contains("cmdstat_evalsha:"), "scripts were sent by digest")
        one.close()
        two.close()
    }
}
#endif
