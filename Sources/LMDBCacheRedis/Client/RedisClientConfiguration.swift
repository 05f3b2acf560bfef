#if Redis
import NIOSSL
import RESP

/// How the client reaches Redis: the servers, credentials, TLS, pool size, timeouts and backoff.
/// The public `RedisConfiguration` maps onto it.
struct RedisClientConfiguration: Sendable {
    /// The RESP version the connections speak.
    enum ProtocolVersion: Sendable, Hashable {
        /// RESP2, every server's default; no handshake beyond `AUTH`.
        case resp2
        /// RESP3, negotiated with `HELLO 3` (Redis 6 and later) after connecting.
        case resp3
    }

    /// How connect attempts to a server that refused the last one are spaced: each failure doubles
    /// the wait, from `initial` to at most `maximum`, and a random fraction `jitter` of it is added
    /// or removed so that many clients do not retry in step. Callers arriving while the wait runs
    /// fail at once with the last connect error instead of connecting.
    struct Backoff: Sendable, Hashable {
        /// The wait after the first failure. Default: 10 ms.
        var initial: Duration
        /// The longest wait. Default: 1 s.
        var maximum: Duration
        /// The fraction (0...1) of each wait drawn at random and added or removed. Default: 0.2.
        var jitter: Double

        /// A backoff from `initial` (default 10 ms) doubling to `maximum` (default 1 s), ±`jitter`
        /// (default 20 %).
        init(initial: Duration = .milliseconds(10), maximum: Duration = .seconds(1), jitter: Double = 0.2) {
            self.initial = initial
            self.maximum = maximum
            self.jitter = min(max(jitter, 0), 1)
        }

        /// The wait after `failures` consecutive failures (1: the first), with its jitter drawn.
        func delay(afterFailures failures: Int) -> Duration {
            guard failures > 0 else { return .zero }
            var wait = initial
            for _ in 1..<min(failures, 40) where wait < maximum { wait = wait * 2 }
            wait = min(wait, maximum)
            guard jitter > 0 else { return wait }
            return wait * (1 + Double.random(in: -jitter...jitter))
        }
    }

    /// The servers: one for a single server (the pool uses the first), the seeds of a cluster, or
    /// any of them for the subscriber.
    var endpoints: [RedisEndpoint]
    /// The ACL user `AUTH` names; nil sends `AUTH password` (the `default` user). Default: nil.
    var username: String?
    /// The password; nil sends no `AUTH`. Default: nil.
    var password: String?
    /// TLS for every connection; nil connects in plain TCP. Default: nil.
    var tls: TLSConfiguration?
    /// The name the server's certificate is checked against and sent as SNI; nil uses the
    /// endpoint's host. Default: nil.
    var tlsServerHostname: String?
    /// The longest a TCP (and TLS) connect may take, also bounded by each call's own timeout.
    /// Default: 1 s.
    var connectTimeout: Duration
    /// Connections per server in a pool. Default: 2.
    var poolSize: Int
    /// The spacing of connect attempts after failures. Default: 10 ms doubling to 1 s, ±20 %.
    var reconnectBackoff: Backoff
    /// The protocol spoken. Default: RESP2.
    var protocolVersion: ProtocolVersion
    /// The reply parser's bounds. Default: Redis's 512 MiB bulk limit, 1,048,576 elements, depth 64.
    var parserLimits: RESPParser.Limits

    /// A configuration for `endpoints`; every other setting has the default its property states.
    init(
        endpoints: [RedisEndpoint], username: String? = nil, password: String? = nil, tls: TLSConfiguration? = nil,
        tlsServerHostname: String? = nil, connectTimeout: Duration = .seconds(1), poolSize: Int = 2,
        reconnectBackoff: Backoff = Backoff(), protocolVersion: ProtocolVersion = .resp2,
        parserLimits: RESPParser.Limits = RESPParser.Limits()
    ) {
        self.endpoints = endpoints
        self.username = username
        self.password = password
        self.tls = tls
        self.tlsServerHostname = tlsServerHostname
        self.connectTimeout = connectTimeout
        self.poolSize = max(1, poolSize)
        self.reconnectBackoff = reconnectBackoff
        self.protocolVersion = protocolVersion
        self.parserLimits = parserLimits
    }
}
#endif
