#if Redis
import RESP
import Testing

@testable import LMDBCacheRedis

/// The pool's connect outcome must reach its caller as soon as the server (or the kernel) has
/// answered, even while every thread of Swift's cooperative pool is busy: the caller's deadline is
/// an event-loop timer, and a connect finished in a Swift task that cannot run yet used to lose to
/// it, turning a refused AUTH or a refused connect into `timedOut` at the caller's deadline.
///
/// The caller's deadline is a hang bound: with the defect the connect never finishes while the
/// pool is busy (it is released only after the call), so the deadline wins however long it is;
/// without it, the server's answer wins however slow the machine.
@Suite("Redis client: connect failures while Swift's cooperative pool is busy")
struct BusyCooperativePoolTests {
    /// Runs `call` on a thread of its own while every cooperative thread is blocked; what it threw.
    private static func errorWhilePoolIsBusy(
        _ call: @escaping @Sendable () async throws -> [RESPValue]
    ) async -> (busy: Bool, error: (any Error)?) {
        await withTaskExecutorPreference(OwnQueueTaskExecutor()) {
            let pool = BusyCooperativePool()
            defer { pool.release() }
            let busy = pool.waitUntilBusy()
            do {
                _ = try await call()
                return (busy, nil)
            } catch {
                return (busy, error)
            }
        }
    }

    @Test("a refused AUTH throws authenticationFailed, not timedOut, while the cooperative pool is busy")
    func refusedAuthentication() async throws {
        let server = try await RedisServer(password: "s3cret")
        defer { server.stop() }
        for version in [RedisClientConfiguration.ProtocolVersion.resp2, .resp3] {
            let wrong = try RedisConnectionPool(
                configuration: server.configuration(password: "wrong", protocolVersion: version), logger: testLogger)
            let (busy, error) = await Self.errorWhilePoolIsBusy {
                try await wrong.execute([RedisCommand("PING")], timeout: hangBound)
            }
            #expect(busy, "hung: the cooperative pool's threads did not all block within \(hangBound)")
            guard case .authenticationFailed = error as? RedisClientError else {
                Issue.record("expected authenticationFailed, got \(String(describing: error))")
                await wrong.close()
                continue
            }
            await wrong.close()
        }
    }

    @Test(
        "a refused connect (nothing listening) throws connectFailed, not timedOut, while the cooperative pool is busy")
    func refusedConnect() async throws {
        let server = try await RedisServer()
        server.stop()
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        let (busy, error) = await Self.errorWhilePoolIsBusy {
            try await pool.execute([RedisCommand("GET", bytes("k"))], timeout: hangBound)
        }
        #expect(busy, "hung: the cooperative pool's threads did not all block within \(hangBound)")
        guard case .connectFailed = error as? RedisClientError else {
            Issue.record("expected connectFailed, got \(String(describing: error))")
            await pool.close()
            return
        }
        await pool.close()
    }
}
#endif
