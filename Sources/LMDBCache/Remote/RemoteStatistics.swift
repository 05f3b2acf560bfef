/// Counts of a cache's remote tier (``Cache/Configuration/remote``) since it opened:
/// ``CacheStatistics/remote``.
public struct RemoteStatistics: Sendable, Equatable {
    /// Lookups that found a usable record.
    public var hits = 0
    /// Lookups that found none.
    public var misses = 0
    /// Lookups and writes that failed: timed out, refused, unreachable, or skipped while the
    /// circuit was open. A failed lookup is a miss to the caller.
    public var failures = 0
    /// Records found damaged or not written for their key (a miss, and removed there).
    public var damagedRecords = 0
    /// Writes and removals sent (each once the store acknowledged it).
    public var writes = 0
    /// Writes and removals queued or being sent now: zero once everything this cache changed has
    /// reached Redis (what a test or a graceful shutdown waits for).
    public var pendingWrites = 0
    /// Writes and removals dropped unsent: the queue was full (the store was down or slower than
    /// the writes for longer than the queue holds), or the cache closed while it was unreachable.
    public var writesDropped = 0
    /// Write attempts Redis answered with an error (`-OOM` when full, `-LOADING` while it loads
    /// its data, `-READONLY` on a replica after a failover, ...). Each is retried with backoff;
    /// a write that cannot land within the Redis configuration's `writeRetryLimit` is dropped
    /// (``writesDropped``) and its key removed from Redis instead.
    public var writesRefused = 0
    /// Changes this cache published for the others.
    public var changesPublished = 0
    /// Changes other caches published that this one received and applied to its memory and disk
    /// tiers.
    public var changesReceived = 0
    /// Entries those changes removed here (memory and disk).
    public var changesApplied = 0
    /// Times this cache dropped its memory tier because it may have missed changes (its
    /// subscription was lost and made again).
    public var memoryTierDrops = 0
    /// Times the circuit opened after consecutive failures (the remote tier is then skipped until
    /// a probe succeeds).
    public var circuitOpenings = 0
    /// Whether the circuit is open now.
    public var isCircuitOpen = false
    /// Whether the subscription to other machines' changes is up now. Until it first is (just
    /// after the cache opens, or while Redis is unreachable), changes made elsewhere are not
    /// heard.
    public var isSubscribed = false
    /// Load leases this cache took (it then ran the loader).
    public var leasesAcquired = 0
    /// Get-or-loads that found the lease held elsewhere and waited.
    public var leaseWaits = 0
    /// Of those, the ones the holder's value ended (the others loaded themselves).
    public var leaseWaitsServed = 0

    /// All zero.
    public init() {}
}
