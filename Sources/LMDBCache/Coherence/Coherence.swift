extension Cache {
    /// How a cache keeps its memory tier in step with the changes other caches sharing its
    /// directory make (other processes, or other `Cache` instances on the directory in this one).
    ///
    /// Every write, removal, ``Cache/removeAll()`` and ``Cache/removeAll(taggedWith:)`` made
    /// through any cache on the directory is recorded in a bounded change log inside the store,
    /// in the transaction that makes it. A cache with a memory tier reads the log every
    /// ``pollInterval`` and drops the memory entries others changed; its next read of them comes
    /// from disk. So another process's committed change is visible here at most about one
    /// ``pollInterval`` later (plus the time to apply it): that is the bound on staleness.
    ///
    /// A cache that falls further behind than the log keeps (65,536 changes) drops its whole
    /// memory tier, and counts it (``CacheStatistics/memoryTierDrops``). Entries another process
    /// evicts from disk (limits, expiry, trims) send no message: the disk tier is shared, and
    /// memory entries are copies with their own limits.
    public struct Coherence: Sendable, Equatable {
        /// How often the change log is read (at least every millisecond: shorter intervals count
        /// as 1 ms); nil stops following it (each process then sees
        /// others' changes only once its own memory entries leave, by their limits or expiry).
        /// Default: 5 ms. A poll that finds nothing costs a timer wakeup and the read of one
        /// integer in a pooled read transaction: measured at 6–13 ms of CPU a second per cache
        /// on a loaded 2-core VM at 5 ms (about 1 % of a core); a longer interval costs less.
        public var pollInterval: Duration?

        /// Follows the change log every `pollInterval`.
        public init(pollInterval: Duration? = .milliseconds(5)) {
            self.pollInterval = pollInterval
        }

        /// Follows the log every 5 ms.
        public static var `default`: Coherence { Coherence() }
        /// Does not follow the log (changes made here are still logged for others).
        public static var off: Coherence { Coherence(pollInterval: nil) }
    }
}
