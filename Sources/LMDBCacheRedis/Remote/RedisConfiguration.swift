#if Redis
import NIOSSL

/// Where the Redis tier lives and how it behaves when Redis is slow or down: the argument of
/// ``LMDBCache/RemoteTier/redis(_:)``.
///
/// ```swift
/// var configuration = Cache<String, Article>.Configuration()
/// configuration.remote = .redis(RedisConfiguration(
///     endpoints: [.init(host: "10.0.0.5", port: 6379)], password: secret, namespace: "articles"))
/// ```
public struct RedisConfiguration: Sendable {
    /// A Redis server's address.
    public struct Endpoint: Sendable, Hashable {
        /// A host name or IP address.
        public var host: String
        /// The TCP port. Default: 6379.
        public var port: Int

        /// The server at `host`:`port`.
        public init(host: String, port: Int = 6379) {
            self.host = host
            self.port = port
        }
    }

    /// The server, or with ``cluster`` the seed nodes of a Redis Cluster (any reachable one
    /// tells the client the rest).
    public var endpoints: [Endpoint]
    /// Whether ``endpoints`` are nodes of a Redis Cluster: keys are then spread over its primaries
    /// by hash slot, and `MOVED`/`ASK` redirections are followed. Default: false.
    public var cluster: Bool
    /// The ACL user (Redis 6+) to authenticate as with ``password``; nil: the default user.
    public var username: String?
    /// The password (`AUTH`); nil: no authentication.
    public var password: String?
    /// TLS to every node (swift-nio-ssl); nil: plain TCP. Default: nil.
    public var tls: TLSConfiguration?
    /// The name the server's certificate is checked against; nil: the endpoint's host.
    public var tlsServerName: String?
    /// Prefix of every Redis key and of the pub/sub channel, so several caches (and other
    /// applications) share one Redis: caches that should see each other's values and changes use
    /// the same namespace. Default: `lmdbcache`.
    public var namespace: String
    /// The longest a get-or-load waits for a Redis reply (connecting included) before it treats
    /// the remote tier as a miss. Default: 250 ms.
    public var commandTimeout: Duration
    /// Connections per node for commands (pub/sub uses one more). Default: 2.
    public var connectionsPerNode: Int
    /// Writes, removals and changes waiting to be sent, at most; past it the oldest are dropped
    /// and counted (``LMDBCache/RemoteStatistics/writesDropped``). Default: 10,000.
    public var writeQueueLimit: Int
    /// Consecutive failures that open the circuit: Redis is then skipped (lookups miss at once,
    /// writes wait in the queue) until a probe succeeds. Default: 5.
    public var failureThreshold: Int
    /// How long the circuit stays open before one probe is let through. Default: 1 s.
    public var openDuration: Duration
    /// What a cache drops when it may have missed other machines' changes (its subscription was
    /// lost and made again). Default: ``MissedChanges/dropMemoryTier``.
    public var missedChanges: MissedChanges = .dropMemoryTier

    /// What a cache drops after missing changes.
    public enum MissedChanges: Sendable, Hashable {
        /// The memory tier. Its disk tier may serve entries another machine changed or removed
        /// meanwhile, until they expire: for data where a short-lived stale read after a Redis
        /// outage is acceptable, and a cold disk tier after every outage is not.
        case dropMemoryTier
        /// Both local tiers: nothing changed elsewhere during the outage is served; the disk tier
        /// starts cold (its values come back from Redis as they are asked for).
        case dropBothTiers
    }

    /// A configuration for the server (or cluster seeds) at `endpoints`; every other setting has
    /// its documented default.
    public init(
        endpoints: [Endpoint], cluster: Bool = false, username: String? = nil, password: String? = nil,
        tls: TLSConfiguration? = nil, tlsServerName: String? = nil, namespace: String = "lmdbcache",
        commandTimeout: Duration = .milliseconds(250), connectionsPerNode: Int = 2, writeQueueLimit: Int = 10_000,
        failureThreshold: Int = 5, openDuration: Duration = .seconds(1)
    ) {
        self.endpoints = endpoints
        self.cluster = cluster
        self.username = username
        self.password = password
        self.tls = tls
        self.tlsServerName = tlsServerName
        self.namespace = namespace
        self.commandTimeout = commandTimeout
        self.connectionsPerNode = connectionsPerNode
        self.writeQueueLimit = writeQueueLimit
        self.failureThreshold = failureThreshold
        self.openDuration = openDuration
    }
}
#endif
