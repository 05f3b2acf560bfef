#if Redis
import Foundation
import NIOSSL
import RESP
import Testing

@testable import LMDBCacheRedis

@Suite("Redis client: AUTH, ACL users and TLS against a real redis-server")
struct RedisAuthenticationTests {
    @Test("AUTH with the right password works, a wrong one throws authenticationFailed, none is refused")
    func password() async throws {
        let server = try await RedisServer(password: "s3cret")
        defer { server.stop() }
        let pool = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        #expect(try await pool.execute([RedisCommand("PING")], timeout: hangBound) == [.simpleString(bytes("PONG"))])
        await pool.close()
        for version in [RedisClientConfiguration.ProtocolVersion.resp2, .resp3] {
            let wrong = try RedisConnectionPool(
                configuration: server.configuration(password: "wrong", protocolVersion: version), logger: testLogger)
            await #expect {
                try await wrong.execute([RedisCommand("PING")], timeout: hangBound)
            } throws: { error in
                if case .authenticationFailed = error as? RedisClientError { return true }
                return false
            }
            await wrong.close()
        }
        var anonymous = server.configuration()
        anonymous.password = nil
        let none = try RedisConnectionPool(configuration: anonymous, logger: testLogger)
        await #expect {
            try await none.execute([RedisCommand("PING")], timeout: hangBound)
        } throws: { error in
            if case .authenticationFailed = error as? RedisClientError { return true }
            return false
        }
        await none.close()
    }

    @Test("an ACL user made with ACL SETUSER by the default user logs in with AUTH user password, RESP2 and RESP3")
    func aclUser() async throws {
        let server = try await RedisServer(password: "admin-pw")
        defer { server.stop() }
        let admin = try RedisConnectionPool(configuration: server.configuration(), logger: testLogger)
        let created = try await admin.execute(
            [
                RedisCommand(
                    "ACL", bytes("SETUSER"), bytes("app"), bytes("on"), bytes(">pw"), bytes("~*"), bytes("&*"),
                    bytes("+@all"))
            ], timeout: hangBound)
        #expect(created == [.simpleString(bytes("OK"))])
        await admin.close()
        for version in [RedisClientConfiguration.ProtocolVersion.resp2, .resp3] {
            let app = try RedisConnectionPool(
                configuration: server.configuration(username: "app", password: "pw", protocolVersion: version),
                logger: testLogger)
            let whoami = try await app.execute([RedisCommand("ACL", bytes("WHOAMI"))], timeout: hangBound)
            #expect(whoami == [.bulkString(bytes("app"))])
            await app.close()
            let wrong = try RedisConnectionPool(
                configuration: server.configuration(username: "app", password: "nope", protocolVersion: version),
                logger: testLogger)
            await #expect {
                try await wrong.execute([RedisCommand("PING")], timeout: hangBound)
            } throws: { error in
                if case .authenticationFailed = error as? RedisClientError { return true }
                return false
            }
            await wrong.close()
        }
    }

    @Test("TLS with the server's CA works (with a password, RESP3 too); another CA fails to connect")
    func tls() async throws {
        let server = try await RedisServer(password: "pw", tls: true)
        defer { server.stop() }
        for version in [RedisClientConfiguration.ProtocolVersion.resp2, .resp3] {
            let pool = try RedisConnectionPool(
                configuration: server.configuration(protocolVersion: version), logger: testLogger)
            let value = [UInt8](repeating: 0xAB, count: 1 << 20)
            let replies = try await pool.execute(
                [RedisCommand("SET", bytes("k"), value), RedisCommand("GET", bytes("k"))], timeout: hangBound)
            #expect(replies == [.simpleString(bytes("OK")), .bulkString(value)])
            await pool.close()
        }
        var wrongCA = server.configuration()
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(try #require(server.tlsFiles).otherCACertificate)
        wrongCA.tls = tls
        let pool = try RedisConnectionPool(configuration: wrongCA, logger: testLogger)
        await #expect {
            try await pool.execute([RedisCommand("PING")], timeout: hangBound)
        } throws: { error in
            if case .connectFailed = error as? RedisClientError { return true }
            return false
        }
        await pool.close()
        // Plain TCP to a TLS port does not get a reply it could take for Redis's.
        var plain = server.configuration()
        plain.tls = nil
        let plainPool = try RedisConnectionPool(configuration: plain, logger: testLogger)
        await #expect(throws: RedisClientError.self) {
            try await plainPool.execute([RedisCommand("PING")], timeout: .seconds(3))
        }
        await plainPool.close()
    }
}
#endif
