#if Redis
import Logging
import NIOSSL
import RESP

@testable import LMDBCacheRedis

/// A logger for the client under test.
let testLogger = Logger(label: "lmdbcache.redis.tests")

/// A command's bytes from text.
func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

extension RedisServer {
    /// A client configuration for this server: its endpoint and, when it has them, password and TLS
    /// trusting its CA (checked against `localhost`).
    func configuration(
        username: String? = nil, password: String? = nil,
        protocolVersion: RedisClientConfiguration.ProtocolVersion = .resp2,
        poolSize: Int = 2
    ) -> RedisClientConfiguration {
        var tls: TLSConfiguration?
        if let tlsFiles {
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.trustRoots = .file(tlsFiles.caCertificate)
            tls = configuration
        }
        return RedisClientConfiguration(
            endpoints: [endpoint], username: username ?? self.username, password: password ?? self.password, tls: tls,
            tlsServerHostname: tls == nil ? nil : "localhost",
            // Only a hang reaches it: a handshake that took more than a second on a loaded
            // 2-core machine once failed the suites.
            connectTimeout: hangBound, poolSize: poolSize, protocolVersion: protocolVersion)
    }
}
#endif
