#if Redis
import CacheTestSupport
import Foundation
import LMDBCache
@testable import LMDBCacheRedis
import Synchronization
import Testing

/// Issue 32, defects 2 and 3: a primary that holds writes (what a manual failover does) and a
/// link too slow for a write. Real `redis-server` processes (a 6-node cluster, a proxy of ours).
@Suite("Redis write protocol: paused primaries and slow links", .serialized)
struct LinkFaultTests {
    typealias Machine = RemoteTierTests

    /// Defect 2: the change's PUBLISH went to some primary while its SET waited on the key's own,
    /// so another machine heard the change, read the old value back from Redis and kept it. The
    /// write script now publishes after its SET, on the key's primary: nothing is heard before
    /// the value it announces is there to read.
    @Test(
        "In a cluster, no machine hears of a write before the write is in Redis: a reader never keeps the value it replaced"
    )
    func changeIsHeardOnlyAfterItsWrite() async throws {
        let cluster = try await RedisCluster.start()
        defer { cluster.stop() }
        let port = cluster.nodes[0].port
        let (writer, d1) = try await Review20Tests.machine(port: port, cluster: true)
        let (reader, d2) = try await Review20Tests.machine(port: port, cluster: true)
        defer {
            writer.close()
            reader.close()
            d1.remove()
            d2.remove()
        }
        let primaries = try cluster.roles(askingPort: port).filter { !$0.value.isEmpty }
        // Three rounds, a key each: before the fix the change's PUBLISH reached a primary other
        // than the paused one in two rounds of three, so the old code would pass all three once
        // in 27 runs.
        for round in 0..<3 {
            let key = "k\(round)"
            let slot = HashSlot.slot(of: Array("t:v:\(key)".utf8))
            let home = try #require(
                primaries.first { $0.value.compactMap(Nemesis.slotRange).contains { $0.contains(slot) } }?.key)
            // The reader hears of v1 before it reads it: a late arrival of that change would drop
            // its copy during the pause and count as hearing of v2 below.
            let heardBeforeV1 = Review20Tests.remote(reader).changesReceived
            writer.insert("v1", forKey: key, expiresAfter: .seconds(600))
            await Machine.wait(writer, "v1 of \(key) landed") { $0.pendingWrites == 0 }
            await Machine.wait(reader, "the reader heard of v1 of \(key)") { $0.changesReceived > heardBeforeV1 }
            #expect(try await reader.value(forKey: key) { "loaded" } == "v1")
            let heardBefore = Review20Tests.remote(reader).changesReceived

            // The key's primary holds writes (scripts and PUBLISH too) for a second, then runs them.
            _ = try cluster.command(home, "CLIENT", "PAUSE", "1000", "WRITE")
            writer.insert("v2", forKey: key, expiresAfter: .seconds(600))
            // The reader asks for the key all through the pause: had it heard the change early,
            // it would have read v1 back from Redis into both its tiers.
            let stop = StopFlag()
            let reads = Task {
                var seen: [String] = []
                while !stop.stopped.load(ordering: .relaxed) {
                    seen.append(try await reader.value(forKey: key) { "loaded" })
                    try await Task.sleep(for: .milliseconds(2))
                }
                return seen
            }
            await Machine.wait(writer, "v2 of \(key) landed after the pause") { $0.pendingWrites == 0 }
            await Machine.wait(reader, "the reader heard of v2 of \(key)") { $0.changesReceived > heardBefore }
            stop.stopped.store(true, ordering: .relaxed)
            let seen = try await reads.value

            #expect(seen.first == "v1", "the reader read while the write was held")
            #expect(!seen.contains("loaded"), "the key was never missing from Redis")
            #expect(reader.memory.value(forKey: key) != "v1", "the reader kept the replaced value in memory")
            #expect(reader.value(forKey: key) != "v1", "the reader kept the replaced value in its local tiers")
            #expect(try await reader.value(forKey: key) { "loaded" } == "v2")
        }
    }

    final class StopFlag: Sendable {
        let stopped = Atomic<Bool>(false)
    }

    /// Defect 3: a pipeline was resent whole under the same timeout until it succeeded, so a write
    /// the link could not carry in time was resent for ever and every later write and removal
    /// waited behind it (and another machine kept serving a removed value).
    @Test(
        "A write the link cannot carry within the command timeout holds up no other write, and is given up, its key removed, within writeRetryLimit"
    )
    func slowLinkWriteHoldsUpNoOther() async throws {
        let server = try await RedisServer()
        let proxy = try FaultProxy(upstreamPort: server.port)
        defer { proxy.stop() }
        let (one, d1) = try await WriteProtocolTests.machine(server) {
            $0.endpoints = [.init(host: "127.0.0.1", port: proxy.port)]
            $0.commandTimeout = .milliseconds(300)
            $0.writeRetryLimit = .seconds(3)
        }
        defer {
            one.close()
            d1.remove()
        }
        one.insert("old", forKey: "removed")
        one.insert("small", forKey: "big")
        await Machine.wait(one, "the first writes landed") { $0.pendingWrites == 0 && $0.writes >= 2 }

        // 20 kB/s each way: the large record (600,000 random letters, about 450 kB deflated) takes
        // some 20 s to cross, the command timeout is 300 ms, and it is under maximumRecordSize,
        // so it is sent, not refused up front.
        proxy.current = .bandwidth(bytesPerSecond: 20_000)
        var generator = SystemRandomNumberGenerator()
        let large = String(
            (0..<600_000).map { _ in Character(Unicode.Scalar(UInt8.random(in: 65...122, using: &generator))) })
        one.insert(large, forKey: "big")
        one.removeValue(forKey: "removed")
        one.insert("after", forKey: "other")

        await waitFor("the removal and the later write landed while the large write could not") {
            guard case .tombstone = try? WriteProtocolTests.envelope(server, "removed"),
                case .record = try? WriteProtocolTests.envelope(server, "other")
            else { return false }
            return true
        }
        await Machine.wait(one, "the large write was given up") { $0.pendingWrites == 0 }
        let statistics = Review20Tests.remote(one)
        #expect(statistics.writesDropped >= 1, "\(statistics)")
        guard case .tombstone = try WriteProtocolTests.envelope(server, "big") else {
            Issue.record("Redis should hold a removal of the large value's key, not the small value it replaced")
            return
        }
    }
}
#endif
