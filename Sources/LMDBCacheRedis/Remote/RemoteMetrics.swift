#if Redis
import Metrics

/// The Redis tier's swift-metrics, with the cache's `cache` dimension:
///
/// | metric | what |
/// |---|---|
/// | `lmdbcache_remote_lookups_total{result=hit/miss/failure}` | lookups in Redis and how they ended |
/// | `lmdbcache_remote_writes_total{result=sent/failed/refused}` | writes and removals that landed; attempts that got no answer, or an error reply (each retried) |
/// | `lmdbcache_remote_circuit_open` | 1 while the circuit is open, else 0 |
struct RemoteMetrics: Sendable {
    let hits: Counter
    let misses: Counter
    let lookupFailures: Counter
    let writesSent: Counter
    let writesFailed: Counter
    let writesRefused: Counter
    let circuitOpen: Gauge

    init(cacheName: String) {
        let cache = ("cache", cacheName)
        hits = Counter(label: "lmdbcache_remote_lookups_total", dimensions: [cache, ("result", "hit")])
        misses = Counter(label: "lmdbcache_remote_lookups_total", dimensions: [cache, ("result", "miss")])
        lookupFailures = Counter(label: "lmdbcache_remote_lookups_total", dimensions: [cache, ("result", "failure")])
        writesSent = Counter(label: "lmdbcache_remote_writes_total", dimensions: [cache, ("result", "sent")])
        writesFailed = Counter(label: "lmdbcache_remote_writes_total", dimensions: [cache, ("result", "failed")])
        writesRefused = Counter(label: "lmdbcache_remote_writes_total", dimensions: [cache, ("result", "refused")])
        circuitOpen = Gauge(label: "lmdbcache_remote_circuit_open", dimensions: [cache])
    }
}
#endif
