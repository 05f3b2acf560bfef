#if Redis
import Foundation
import RESP
import Testing

@testable import LMDBCacheRedis

@Suite("Redis client: commands, pipelines and failures against a real redis-server")
struct RedisConnectionPoolTests {
    @Test("SET, GET and DEL round-trip binary values, empty ones and a 10 MB one")
    func roundTrips() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        defer { server.stop() }
        let binary: [UInt8] = [0, 13, 10, 255, 36, 42] + (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let large = (0..<10_000_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }
        for (key, value) in [([UInt8]("k\r\n\0".utf8), binary), (bytes("empty"), []), (bytes("large"), large)] {
            let replies = try await pool.execute(
                [RedisCommand("SET", key, value, key: key), RedisCommand("GET", key, key: key)], timeout: hangBound)
            #expect(replies == [.simpleString(bytes("OK")), .bulkString(value)])
        }
        // The fixture's own client agrees on the size stored.
        #expect(try server.cli(["STRLEN", "large"]).trimmingCharacters(in: .whitespacesAndNewlines) == "10000000")
        let deleted = try await pool.execute(
            [
                RedisCommand("DEL", bytes("large"), bytes("empty"), bytes("missing")),
                RedisCommand("GET", bytes("large")),
            ],
            timeout: hangBound)
        #expect(deleted == [.integer(2), .bulkString(nil)])
        await pool.close()
    }

    @Test("a pipeline of 1,000 commands returns 1,000 replies in order; concurrent pipelines do not mix")
    func pipelines() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        defer { server.stop() }
        let commands = (0..<1_000).map { RedisCommand("INCRBY", bytes("counter"), bytes("\($0)")) }
        let replies = try await pool.execute(commands, timeout: hangBound)
        var total: Int64 = 0
        let expected = (0..<1_000).map { index -> RESPValue in
            total += Int64(index)
            return .integer(total)
        }
        #expect(replies == expected)
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<20 {
                group.addTask {
                    let key = bytes("task-\(task)")
                    let commands = (0..<50).flatMap { index in
                        [RedisCommand("SET", key, bytes("\(index)")), RedisCommand("GET", key)]
                    }
                    let replies = try await pool.execute(commands, timeout: hangBound)
                    let expected = (0..<50).flatMap { index -> [RESPValue] in
                        [.simpleString(bytes("OK")), .bulkString(bytes("\(index)"))]
                    }
                    #expect(replies == expected)
                }
            }
            try await group.waitForAll()
        }
        await pool.close()
    }

    @Test("error replies are values, and the commands around them still answer")
    func errorReplies() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        defer { server.stop() }
        let replies = try await pool.execute(
            [
                RedisCommand("SET", bytes("list"), bytes("x")), RedisCommand("LPUSH", bytes("list"), bytes("y")),
                RedisCommand("NOSUCHCOMMAND"), RedisCommand("GET", bytes("list")),
            ], timeout: hangBound)
        #expect(replies.count == 4)
        guard case .error(let wrongType) = replies[1], case .error(let unknown) = replies[2] else {
            Issue.record("expected two error replies: \(replies)")
            return
        }
        #expect(String(decoding: wrongType, as: UTF8.self).hasPrefix("WRONGTYPE"))
        #expect(String(decoding: unknown, as: UTF8.self).hasPrefix("ERR unknown command"))
        #expect(replies[3] == .bulkString(bytes("x")))
        await pool.close()
    }

    @Test("RESP3 via HELLO 3: maps, doubles and nulls come as RESP3 values")
    func resp3() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(
            configuration: server.configuration(protocolVersion: .resp3), logger: testLogger)
        defer { server.stop() }
        let replies = try await pool.execute(
            [
                RedisCommand("HSET", bytes("h"), bytes("f"), bytes("v")), RedisCommand("HGETALL", bytes("h")),
                RedisCommand("GET", bytes("missing")), RedisCommand("ZADD", bytes("z"), bytes("1.5"), bytes("m")),
                RedisCommand("ZSCORE", bytes("z"), bytes("m")),
            ], timeout: hangBound)
        #expect(
            replies == [
                .integer(1), .map([RESPPair(key: .bulkString(bytes("f")), value: .bulkString(bytes("v")))]), .null,
                .integer(1), .double(bytes("1.5")),
            ])
        await pool.close()
    }

    @Test("a server that stops answering (SIGSTOP): the call throws timedOut; after SIGCONT the pool works")
    func timeout() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(poolSize: 1), logger: testLogger)
        defer { server.stop() }
        #expect(try await pool.execute([RedisCommand("PING")], timeout: hangBound) == [.simpleString(bytes("PONG"))])
        server.pause()
        await #expect(throws: RedisClientError.timedOut) {
            try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: .milliseconds(300))
        }
        server.resume()
        // The timed-out connection was closed (its stream is out of step); a new one answers.
        // (A poll: a call that times out here is only tried again.)
        await waitFor("the resumed server answered through the pool") {
            (try? await pool.execute([RedisCommand("PING")], timeout: .seconds(5))) == [.simpleString(bytes("PONG"))]
        }
        await pool.close()
    }

    @Test("a killed server fails calls (connection closed, then connect failed); restarted, the pool recovers")
    func killAndRestart() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        defer { server.stop() }
        #expect(try await pool.execute([RedisCommand("SET", bytes("k"), bytes("v"))], timeout: hangBound).count == 1)
        server.kill()
        var errors: [RedisClientError] = []
        for _ in 0..<5 {
            do {
                _ = try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: hangBound)
                Issue.record("a call to a killed server succeeded")
            } catch let error as RedisClientError {
                errors.append(error)
            }
        }
        for error in errors {
            switch error {
            case .connectionClosed, .connectFailed: break
            default: Issue.record("unexpected error \(error)")
            }
        }
        // Once the dead connections are noticed, calls fail to connect (or fail at once while backing off).
        #expect(errors.contains { if case .connectFailed = $0 { true } else { false } })
        try await server.restart()
        await waitFor("the restarted server (empty) answered through the same pool") {
            (try? await pool.execute([RedisCommand("GET", bytes("k"))], timeout: .seconds(5))) == [.bulkString(nil)]
        }
        await pool.close()
    }

    @Test("a closed pool throws closed")
    func closedPool() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        defer { server.stop() }
        _ = try await pool.execute([RedisCommand("PING")], timeout: hangBound)
        await pool.close()
        await #expect(throws: RedisClientError.closed) {
            try await pool.execute([RedisCommand("PING")], timeout: hangBound)
        }
    }

    @Test("nothing listening: connectFailed, and the next calls fail at once while backing off")
    func nothingListening() async throws {
        let server = try await RedisServer()
        server.stop()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        for _ in 0..<3 {
            await #expect {
                try await pool.execute([RedisCommand("PING")], timeout: hangBound)
            } throws: { error in
                if case .connectFailed = error as? RedisClientError { return true }
                return false
            }
        }
        await pool.close()
    }

    @Test("A request held up on one connection (a BLPOP that waits for ever) does not hold up the next: another connection takes it")
    func busyConnectionAvoided() async throws {
        let server = try await RedisServer()
        let pool = try RedisConnectionPool(configuration: server.configuration(poolSize: 2), logger: testLogger)
        defer { server.stop() }
        // One connection, idle.
        #expect(try await pool.execute([RedisCommand("PING")], timeout: hangBound) == [.simpleString(bytes("PONG"))])
        let blocked = Task {
            try await pool.execute([RedisCommand("BLPOP", bytes("never"), bytes("0"))], timeout: hangBound)
        }
        let deadline = ContinuousClock.now + hangBound
        while !(try server.cli(["INFO", "clients"]).contains("blocked_clients:1")) {
            guard ContinuousClock.now < deadline else {
                Issue.record("hung: BLPOP did not block within \(hangBound)")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        // Round robin over ready connections sent these behind the BLPOP, which they waited out.
        for _ in 0..<10 {
            #expect(try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: hangBound) == [.bulkString(nil)])
        }
        try server.cli(["LPUSH", "never", "x"])
        #expect(try await blocked.value == [.array([.bulkString(bytes("never")), .bulkString(bytes("x"))])])
        await pool.close()
    }

    @Test("A failed connect stops the pool growing only for its backoff: later, a request held up on the busy connection gets a new one")
    func growsAgainAfterAFailedConnect() async throws {
        let server = try await RedisServer()
        defer { server.stop() }
        let proxy = try FaultProxy(upstreamPort: server.port)
        var configuration = server.configuration(poolSize: 2)
        configuration.endpoints = [RedisEndpoint(host: "127.0.0.1", port: proxy.port)]
        configuration.connectTimeout = .milliseconds(300)
        // No wait after a failure: the next call may connect at once.
        configuration.reconnectBackoff = .init(initial: .zero, maximum: .zero, jitter: 0)
        let pool = try RedisConnectionPool(configuration: configuration, logger: testLogger)
        #expect(try await pool.execute([RedisCommand("PING")], timeout: hangBound) == [.simpleString(bytes("PONG"))])
        let blocked = Task {
            try await pool.execute([RedisCommand("BLPOP", bytes("never"), bytes("0"))], timeout: hangBound)
        }
        let deadline = ContinuousClock.now + hangBound
        while !(try server.cli(["INFO", "clients"]).contains("blocked_clients:1")) {
            guard ContinuousClock.now < deadline else {
                Issue.record("hung: BLPOP did not block within \(hangBound)")
                return
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        // The second connection's handshake gets no answer: the connect fails.
        proxy.current = .blackHole
        await #expect(throws: RedisClientError.self) {
            try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: hangBound)
        }
        proxy.current = .none
        // The backoff over, a new connection answers. Before, one failure kept every later
        // request on the busy connection, behind the BLPOP, until the pool's last connection died.
        #expect(try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: hangBound) == [.bulkString(nil)])
        try server.cli(["LPUSH", "never", "x"])
        #expect(try await blocked.value == [.array([.bulkString(bytes("never")), .bulkString(bytes("x"))])])
        await pool.close()
    }
}
#endif
