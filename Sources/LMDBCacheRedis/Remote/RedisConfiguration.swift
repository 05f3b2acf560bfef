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
    /// How long a write Redis refuses (`-OOM`, `-LOADING`, `-READONLY`, ...) or does not answer is
    /// retried, with backoff from 50 ms to 2 s, before it is dropped (counted in
    /// ``LMDBCache/RemoteStatistics/writesDropped``) and its key removed from Redis instead, as
    /// soon as Redis takes writes again: no machine then reads the value this write replaced.
    /// A value refused for want of memory is replaced by the removal at once. Removals keep a
    /// tombstone in Redis for this long plus two command timeouts and 5 s, so that no write older
    /// than the removal, retried meanwhile anywhere, can store its value again. Default: 30 s.
    public var writeRetryLimit: Duration = .seconds(30)
    /// The largest record sent to Redis, in bytes (after compression). A larger value is kept by
    /// this machine's tiers only: it is not sent (one transfer that cannot fit the command timeout
    /// would be retried in vain), its key is removed from Redis, and it is counted in
    /// ``LMDBCache/RemoteStatistics/writesRefused``. Default: 4 MiB (16 ms at 2 Gbit/s; a
    /// slower link wants a smaller limit or a longer ``commandTimeout``).
    public var maximumRecordSize: Int = 4 << 20

    /// What a cache drops after missing changes.
    public enum MissedChanges: Sendable, Hashable {
        /// The memory tier. Its disk tier may serve entries another machine changed or removed
        /// meanwhile, until they expire: for data where a short-lived stale read after a Redis
        /// outage is acceptable, and a cold disk tier after every outage is not.
        case dropMemoryTier
        /// Both local tiers: nothing changed elsewhere during the outage is served; the disk tier
        /// starts cold (its values come back from Redis as they are asked for). The first
        /// subscription after the cache opens counts too: a disk tier kept across a restart may
        /// hold anything changed elsewhere while the process was not running.
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
#if Redis
extension RedisConfiguration: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The settings with the password redacted: a configuration printed or logged (or dumped by a
    /// debugger's mirror) never shows it.
    public var description: String {
        let endpoints = self.endpoints.map { "\($0.host):\($0.port)" }.joined(separator: ",")
        return "RedisConfiguration(endpoints: [\(endpoints)], cluster: \(cluster), username: \(username ?? "nil"), "
            + "password: \(password == nil ? "nil" : "<redacted>"), tls: \(tls == nil ? "off" : "on"), "
            + "namespace: \(namespace), commandTimeout: \(commandTimeout), connectionsPerNode: \(connectionsPerNode), "
            + "writeQueueLimit: \(writeQueueLimit), failureThreshold: \(failureThreshold), "
            + "openDuration: \(openDuration), missedChanges: \(missedChanges), writeRetryLimit: \(writeRetryLimit), "
            + "maximumRecordSize: \(maximumRecordSize))"
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror {
        Mirror(self, children: ["description": description], displayStyle: .struct)
    }
}
#endif
