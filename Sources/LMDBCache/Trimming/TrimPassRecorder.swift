import Logging
import Metrics

/// Counts, times and logs the trim passes of one tier, whoever runs them (the tier's own
/// ``TrimScheduler`` or a ``CacheTrimmingService``).
struct TrimPassRecorder: Sendable {
    let tier: CacheTier
    private let passes: Counter
    private let duration: Metrics.Timer
    private let logger: Logger

    init(tier: CacheTier, logger: Logger) {
        self.tier = tier
        self.logger = logger
        passes = Counter(label: "lmdbcache_trim_passes_total", dimensions: [("tier", tier.rawValue)])
        duration = Metrics.Timer(label: "lmdbcache_trim_pass_duration", dimensions: [("tier", tier.rawValue)])
    }

    /// Runs `pass` (which returns the entries it removed), then records and logs it.
    func run(_ pass: () -> Int) {
        let start = ContinuousClock.now
        let removed = pass()
        let elapsed = ContinuousClock.now - start
        passes.increment()
        duration.recordNanoseconds(elapsed.nanoseconds)
        logger.debug(
            "LMDBCache trim pass",
            metadata: ["tier": "\(tier.rawValue)", "removed": "\(removed)", "duration": "\(elapsed)"])
    }
}
