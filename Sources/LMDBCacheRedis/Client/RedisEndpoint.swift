#if Redis
/// Where a Redis server listens.
struct RedisEndpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host name or IP address.
    var host: String
    /// The TCP port (Redis's default is 6379).
    var port: Int

    /// The server at `host`:`port`.
    init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// `host:port`.
    var description: String { "\(host):\(port)" }
}
#endif
