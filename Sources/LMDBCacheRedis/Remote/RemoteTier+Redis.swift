#if Redis
import LMDBCache
import Logging

extension RemoteTier {
    /// A Redis server (or Redis Cluster) as the tier shared by several machines, and Redis pub/sub
    /// as the channel their caches tell each other of changes on (the article "Several machines"
    /// in LMDBCache's documentation).
    ///
    /// ```swift
    /// configuration.remote = .redis(RedisConfiguration(endpoints: [.init(host: "10.0.0.5")]))
    /// ```
    ///
    /// The connections are made in the background when the cache opens: a Redis that is down does
    /// not keep the cache from opening (its lookups miss until Redis answers).
    public static func redis(_ configuration: RedisConfiguration) -> RemoteTier {
        RemoteTier { context in
            let client = RedisClientConfiguration(configuration)
            guard !client.endpoints.isEmpty else {
                throw CacheError.invalidConfiguration(reason: "the Redis tier needs at least one endpoint")
            }
            guard !configuration.cluster || SlotKeys.suffixesKeepSlot(Array(configuration.namespace.utf8)) else {
                throw CacheError.invalidConfiguration(
                    reason: "Redis tier: in a cluster, the namespace \"\(configuration.namespace)\" has an empty hash "
                        + "tag (its first '{' is followed by '}'), so Redis hashes whole keys and a tag's version hash "
                        + "cannot be kept in its set's hash slot; choose a namespace without one")
            }
            let executor: any RedisExecutor
            do {
                if configuration.cluster {
                    let connector = try RedisConnector(configuration: client)
                    let logger = context.logger
                    executor = RedisClusterClient(seeds: client.endpoints, logger: logger) { endpoint in
                        RedisConnectionPool(connector: connector, endpoint: endpoint, logger: logger)
                    }
                } else {
                    executor = try RedisConnectionPool(configuration: client, logger: context.logger)
                }
                let keys = RedisKeys(namespace: configuration.namespace)
                let subscriber = { (feed: RedisChangeFeed, changesArrived: @escaping @Sendable () -> Void) throws in
                    try RedisSubscriber(
                        configuration: client, channel: keys.channel, logger: context.logger,
                        onMessage: { payload in
                            if feed.deliver(payload) { changesArrived() }
                        },
                        onSubscribed: { isResubscription in
                            // The first subscription follows the time the cache was not running:
                            // its disk tier may hold anything changed elsewhere meanwhile.
                            guard isResubscription || configuration.missedChanges == .dropBothTiers else { return }
                            feed.markMissed()
                            changesArrived()
                        })
                }
                return try RedisRemoteStore(
                    executor: executor, subscriber: subscriber, configuration: configuration, context: context)
            } catch let error as RedisClientError {
                throw CacheError.invalidConfiguration(reason: "Redis tier: \(error)")
            }
        }
    }
}

extension RedisClientConfiguration {
    /// The client's settings for the public configuration.
    init(_ configuration: RedisConfiguration) {
        self.init(
            endpoints: configuration.endpoints.map { RedisEndpoint(host: $0.host, port: $0.port) },
            username: configuration.username, password: configuration.password, tls: configuration.tls,
            tlsServerHostname: configuration.tlsServerName,
            connectTimeout: max(.seconds(1), configuration.commandTimeout.forTimer),
            poolSize: configuration.connectionsPerNode)
    }
}
#endif
