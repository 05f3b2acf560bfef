import Logging

/// A third level between the disk tier and the loader, shared by the caches of several machines:
/// lookups go memory → disk → remote → loader, and what one machine stores or removes reaches the
/// others.
///
/// A remote tier comes from a product of its own (`LMDBCacheRedis`: `.redis(…)`), set in
/// ``Cache/Configuration/remote``:
///
/// ```swift
/// import LMDBCacheRedis
///
/// var configuration = Cache<String, Article>.Configuration()
/// configuration.remote = .redis(RedisConfiguration(endpoints: [.init(host: "10.0.0.5", port: 6379)]))
/// ```
///
/// Only get-or-loads (``Cache/value(forKey:policy:cost:expiresAfter:freshness:load:)-(_,_,_,_,_,()->Value)``
/// and the bulk form, one pipelined exchange for all its keys) consult it, after both local tiers missed; plain lookups (`cache[key]`,
/// ``Cache/value(forKey:)``) stay local and never wait on the network. A remote hit is stored in
/// both local tiers with its remaining lifetime. Inserts, loaded values and removals are sent in
/// the background, in order, without making the caller wait; a remote tier that is slow or down
/// costs a get-or-load at most its command timeout, and then nothing while its circuit is open.
public struct RemoteTier: Sendable {
    /// Opens the store for one cache.
    package let open: @Sendable (RemoteContext) throws -> any RemoteStore

    /// A remote tier whose store `open` makes when a ``Cache`` opens.
    package init(open: @escaping @Sendable (RemoteContext) throws -> any RemoteStore) {
        self.open = open
    }
}

/// What a ``RemoteStore`` is told of the cache it serves.
package struct RemoteContext: Sendable {
    /// The cache's ``CacheChange/origin``: stamped on the changes it publishes, so it skips them
    /// when they come back.
    package var origin: UInt64
    /// The `cache` dimension of metrics.
    package var cacheName: String
    package var logger: Logger
    /// Called when changes arrived on the store's feed: the cache then reads the feed at once
    /// rather than at its next poll.
    package var changesArrived: @Sendable () -> Void

    package init(origin: UInt64, cacheName: String, logger: Logger, changesArrived: @escaping @Sendable () -> Void) {
        self.origin = origin
        self.cacheName = cacheName
        self.logger = logger
        self.changesArrived = changesArrived
    }
}

/// The store behind a ``RemoteTier``: what ``Cache`` asks of it. Values travel as disk-tier records
/// (``RemoteRecord``), checksummed, so a damaged or foreign value is a miss, never a wrong value.
///
/// Every call is bounded by the store's command timeout and none throws: a failure is a miss (or
/// a write not made), counted in ``statistics`` and logged by the store.
package protocol RemoteStore: Sendable {
    /// The longest one get-or-load waits on the store's replies, in all (``RemoteBudget``).
    var commandTimeout: Duration { get }

    /// The record stored for `key`, or nil (missing, or the store failed, is unreachable, or
    /// `budget` is spent). Waits on the store at most what `budget` has left, and charges it.
    func record(forKey key: [UInt8], budget: RemoteBudget) async -> [UInt8]?

    /// Queues storing `record` under `key` until `keepUntil` (milliseconds since 1970: the end of
    /// its stale window, else its expiry; 0: no end), indexed under `tags` (stored bytes), then
    /// publishing the key's change. With `absentSince` (a loaded value after a remote miss: the
    /// wall-clock milliseconds since 1970 at which that lookup began) the record is stored, and
    /// published, only if the key holds none by then and was not removed since. With `loadStamp`
    /// (a loaded value: ``loadStamp()`` taken when its load began) the write is as old as its
    /// load: a change this cache made, or read, before the load began is older than it, and one
    /// made after (here, or elsewhere as the store orders versions) is newer, whichever reaches
    /// the store first. Returns at once.
    func write(
        _ record: [UInt8], forKey key: [UInt8], keepUntil: UInt64, tags: [[UInt8]], absentSince: UInt64?,
        loadStamp: UInt64?)

    /// An opaque reading of the store's version clock, taken when a load begins, that versions
    /// the load's value (``write(_:forKey:keepUntil:tags:absentSince:loadStamp:)``).
    func loadStamp() -> UInt64

    /// Queues the removal of `key`, then publishing it.
    func remove(forKey key: [UInt8])

    /// The record ``record(forKey:)`` returned for `key` is damaged or not `key`'s: counted, and
    /// removed there (without publishing: no value changed).
    func discardDamaged(forKey key: [UInt8])

    /// Queues the removal of every entry carrying the tag stored as `tag`, then publishing it.
    func removeAll(taggedWith tag: [UInt8])

    /// Queues the removal of every entry, then publishing it.
    func removeAll()

    /// Tries to take the load lease of `key` for `holdFor` (one machine loads a key missing
    /// everywhere; the others wait for its value).
    /// The records stored for `keys`, in their order (nil where missing or failed): one exchange
    /// (a pipeline per node), waiting at most what `budget` has left.
    func records(forKeys keys: [[UInt8]], budget: RemoteBudget) async -> [[UInt8]?]

    /// Waits on the store at most what `budget` has left (``RemoteLease/unavailable`` once spent).
    func lease(forKey key: [UInt8], holdFor: Duration, budget: RemoteBudget) async -> RemoteLease

    /// Queues the release of a lease taken by ``lease(forKey:holdFor:)`` (after the writes queued
    /// before it), unless another holder took it since.
    func release(_ token: [UInt8], forKey key: [UInt8])

    /// Waits up to `timeout` for another machine to store a record for `key` (it holds the lease);
    /// nil when none arrived. Its lookups wait on the store at most what `budget` has left.
    func waitForRecord(forKey key: [UInt8], timeout: Duration, budget: RemoteBudget) async -> [UInt8]?

    /// The changes other machines published (``ChangeFeed``).
    var feed: any ChangeFeed { get }

    /// Whether missed changes (a lost subscription) drop the disk tier as well as the memory
    /// tier: entries changed elsewhere meanwhile are then never served from either.
    var dropsDiskTierOnMissedChanges: Bool { get }

    /// The store's counts since it opened.
    var statistics: RemoteStatistics { get }

    /// Stops the store: queued writes are sent if the store is reachable within its timeout,
    /// then every connection closes.
    func close()
}

/// The outcome of asking for a load lease.
package enum RemoteLease: Sendable, Equatable {
    /// Taken: this machine loads; release it with this token.
    case acquired(token: [UInt8])
    /// Another machine holds it: wait for its value.
    case heldElsewhere
    /// The store could not say (down, slow, circuit open): load here.
    case unavailable
}
