/// How a get-or-load treats values that are getting old, a loader that fails, and a loader that is
/// slow: refresh ahead, stale on failure, soft and hard timeouts (Caffeine's `refreshAfterWrite`,
/// FusionCache's fail-safe and timeouts, HTTP's `stale-while-revalidate` and `stale-if-error`).
///
/// Every option is off (nil) by default. Pass one per call to
/// ``Cache/value(forKey:policy:cost:expiresAfter:freshness:load:)-(_,_,_,_,_,()->Value)``, or set
/// ``Cache/Configuration/freshness`` for every call that passes none.
///
/// ```swift
/// let article = try await cache.value(
///     forKey: "a1", expiresAfter: .seconds(600),
///     freshness: Freshness(refreshAfter: .seconds(60), staleIfError: .seconds(3_600),
///                          timeout: .milliseconds(250), hardTimeout: .seconds(5))
/// ) { try await api.article(id: "a1") }
/// ```
///
/// Plain lookups (`cache[key]`, ``Cache/value(forKey:)``, ``Cache/contains(_:)``) never reload,
/// never wait, and never return a value past its expiry.
///
/// Any duration works: one longer than 100 years counts as 100 years (so `.seconds(Int64.max)` is
/// forever), a negative one as zero.
public struct Freshness: Sendable, Hashable {
    /// A get-or-load that finds a value stored longer ago than this returns it at once and starts
    /// one background reload of the key (joining a load already under way). A reload that
    /// succeeds replaces the value in both tiers; one that fails keeps the old value, and is
    /// counted (``CacheStatistics/refreshFailures``).
    public var refreshAfter: Duration?
    /// A value stored with an expiry is kept this long past it (in both tiers, and on disk across
    /// restarts and processes), never returned by plain lookups; when a get-or-load for it runs
    /// the loader and the loader throws (or a timeout passes), the caller gets this stale value
    /// instead of the error. Applies to values the call stores, and to serving the stale ones.
    public var staleIfError: Duration?
    /// When the loader has not answered after this long and a stale value exists (within
    /// ``staleIfError``), the caller gets the stale value; the load goes on in the background and
    /// its result is stored. Without a stale value the caller waits on.
    public var timeout: Duration?
    /// The caller's wait ends after this long: with the stale value when there is one, else with
    /// ``CacheError/loadTimedOut(key:after:)``. The load goes on in the background and its result
    /// is stored.
    public var hardTimeout: Duration?
    /// With a remote tier (``Cache/Configuration/remote``): a key missing in every tier is loaded
    /// by one machine, which holds a lease in the remote tier while the others wait for its value
    /// (``LoadLease``). Without one, it does nothing.
    public var lease: LoadLease? {
        get { leaseBox?.lease }
        set { leaseBox = newValue.map(LeaseBox.init) }
    }
    /// The lease behind a reference: a `Freshness` travels in every get-or-load's async frame,
    /// and 33 more bytes there made a hit allocate (the task allocator's first slab overflowed).
    private var leaseBox: LeaseBox?

    /// Freshness options; each nil (the default) is off.
    public init(
        refreshAfter: Duration? = nil, staleIfError: Duration? = nil, timeout: Duration? = nil,
        hardTimeout: Duration? = nil, lease: LoadLease? = nil
    ) {
        self.refreshAfter = refreshAfter
        self.staleIfError = staleIfError
        self.timeout = timeout
        self.hardTimeout = hardTimeout
        leaseBox = lease.map(LeaseBox.init)
    }
}

/// A ``LoadLease`` held by reference, compared and hashed by value.
private final class LeaseBox: Sendable, Hashable {
    let lease: LoadLease

    init(_ lease: LoadLease) {
        self.lease = lease
    }

    static func == (lhs: LeaseBox, rhs: LeaseBox) -> Bool { lhs.lease == rhs.lease }

    func hash(into hasher: inout Hasher) { hasher.combine(lease) }
}
