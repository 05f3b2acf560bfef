/// Stampede protection across machines: for a key missing in every tier, one machine takes a
/// short lease in the remote tier and loads; the others wait for its value up to ``waitFor``, then
/// load themselves. A lease expires after ``holdFor``, so a machine that dies while loading holds
/// the others up once, for at most that long.
///
/// Set it on ``Freshness/lease`` per call, or on ``Cache/Configuration/freshness`` for every call.
/// Without a remote tier it does nothing (a single process already runs one load per key).
public struct LoadLease: Sendable, Hashable {
    /// How long a lease lasts if its holder neither stores a value nor releases it. Default: 10 s.
    public var holdFor: Duration
    /// How long a machine that did not get the lease waits for the holder's value before it loads
    /// itself. Default: 2 s.
    public var waitFor: Duration

    /// A lease held for `holdFor`, waited on for `waitFor`.
    public init(holdFor: Duration = .seconds(10), waitFor: Duration = .seconds(2)) {
        self.holdFor = holdFor
        self.waitFor = waitFor
    }
}
