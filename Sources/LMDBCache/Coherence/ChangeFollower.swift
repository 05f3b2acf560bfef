import Dispatch
import Foundation
import LMDBCacheStorage
import Logging
import Metrics
import Synchronization

/// Reads a ``ChangeFeed`` every poll interval and applies the changes other caches made to this
/// cache's memory tier: a changed key's entry is dropped, a removed tag's entries are dropped,
/// a removal of everything empties the tier, and missed changes drop the whole tier.
///
/// Why a dropped entry cannot come back stale: the two-tier cache promotes a value read from disk
/// only if the key's memory shard saw no insert or removal since its memory miss, and every drop
/// here is such a removal (a tag's drop touches every shard). A read that missed memory before
/// the drop and read the disk before the change committed therefore does not promote; one that
/// missed after the drop reads the disk after the change committed (the change was in the log,
/// so its transaction was too).
final class ChangeFollower: Sendable {
    /// What the follower does to the memory tier.
    struct Target: Sendable {
        /// Drops the entry of the key with these bytes; returns whether there was one.
        var dropKey: @Sendable ([UInt8]) -> Bool
        /// Drops the entries carrying the tag stored as these bytes; returns how many.
        var dropTag: @Sendable ([UInt8]) -> Int
        /// Drops every entry; returns how many.
        var dropAll: @Sendable () -> Int
        /// What to do when changes were missed (``ChangeDelivery/missed``); returns how many
        /// entries it dropped. The memory tier is dropped whole.
        var missed: @Sendable () -> Int
    }

    private let feed: any ChangeFeed
    /// This cache's ``CacheChange/origin``: its own changes are skipped.
    let origin: UInt64
    private let target: Target
    private let logger: Logger
    private let queue = DispatchQueue(label: "LMDBCache.ChangeFollower")
    /// Marks ``queue``, so ``stop()`` called from a removal listener the follower runs does not
    /// wait for itself.
    private static let queueKey = DispatchSpecificKey<ObjectIdentifier>()
    private let timer = Locked<(any DispatchSourceTimer)?>(nil)
    private let wallClock: @Sendable () -> UInt64

    let received = Atomic<Int>(0)
    let applied = Atomic<Int>(0)
    let memoryDrops = Atomic<Int>(0)
    /// The newest change's lag when applied, milliseconds (from its commit's wall-clock time).
    let lastLag = Atomic<UInt64>(0)
    private let receivedCounter: Counter
    private let appliedCounter: Counter
    private let memoryDropsCounter: Counter
    private let lagTimer: Metrics.Timer
    /// Failures of the feed logged so far: the first is logged at warning, later ones at debug.
    private let failures = Atomic<Int>(0)

    init(
        feed: any ChangeFeed, origin: UInt64, target: Target, cacheName: String, logger: Logger,
        wallClock: @escaping @Sendable () -> UInt64 = { CacheChange.wallClockNow() }
    ) {
        self.feed = feed
        self.origin = origin
        self.target = target
        self.logger = logger
        self.wallClock = wallClock
        queue.setSpecific(key: Self.queueKey, value: ObjectIdentifier(queue))
        let cache = ("cache", cacheName)
        receivedCounter = Counter(label: "lmdbcache_invalidations_total", dimensions: [cache, ("result", "received")])
        appliedCounter = Counter(label: "lmdbcache_invalidations_total", dimensions: [cache, ("result", "applied")])
        memoryDropsCounter = Counter(label: "lmdbcache_memory_tier_drops_total", dimensions: [cache])
        lagTimer = Metrics.Timer(label: "lmdbcache_invalidation_lag_seconds", dimensions: [cache])
    }

    /// Polls every `interval` (at least 1 ms; any length works) until ``stop()``.
    func start(interval: Duration) {
        let source = DispatchSource.makeTimerSource(queue: queue)
        let exact =
            Int128(interval.components.seconds) * 1_000_000_000
            + Int128(interval.components.attoseconds / 1_000_000_000)
        let nanoseconds = Int(clamping: min(max(exact, 1_000_000), Int128(Int.max / 2)))
        source.schedule(
            deadline: .now() + .nanoseconds(nanoseconds), repeating: .nanoseconds(nanoseconds),
            leeway: .nanoseconds(nanoseconds / 10))
        source.setEventHandler { [weak self] in self?.poll() }
        timer.withLock { $0 = source }
        source.resume()
    }

    /// Stops polling and waits for a poll under way (unless called from it: a removal listener).
    func stop() {
        timer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
        if DispatchQueue.getSpecific(key: Self.queueKey) != ObjectIdentifier(queue) { queue.sync {} }
    }

    /// Polls soon on the follower's queue, without waiting: the feed has changes.
    func wake() {
        guard timer.withLock({ $0 != nil }) else { return }
        queue.async { [weak self] in
            guard let self, self.timer.withLock({ $0 != nil }) else { return }
            self.poll()
        }
    }

    /// Runs a poll now on the follower's queue and returns once it is done: for tests, which then
    /// know every change committed before the call is applied.
    func pollNow() {
        if DispatchQueue.getSpecific(key: Self.queueKey) == ObjectIdentifier(queue) { return poll() }
        queue.sync { poll() }
    }

    /// Reads the feed until it has nothing more and applies what others changed. Runs on the
    /// follower's queue (tests call it directly too).
    func poll() {
        do {
            while true {
                switch try feed.receive() {
                case .missed:
                    let dropped = target.missed()
                    memoryDrops.add(1, ordering: .relaxed)
                    memoryDropsCounter.increment()
                    logger.info(
                        "LMDBCache missed changes made by other caches; dropped its memory tier",
                        metadata: ["entries": "\(dropped)"])
                case .changes(let changes):
                    apply(changes)
                    if changes.count < DiskChangeLog.readLimit { return }
                }
            }
        } catch CacheError.closed {
            stopFromPoll()
        } catch {
            if failures.add(1, ordering: .relaxed).newValue == 1 {
                logger.warning(
                    "LMDBCache could not read the change log; memory entries others changed may be served",
                    metadata: ["error": .escaped(error)])
            } else {
                logger.debug("LMDBCache could not read the change log", metadata: ["error": .escaped(error)])
            }
        }
    }

    private func apply(_ changes: [CacheChange]) {
        let now = wallClock()
        for change in changes where change.origin != origin {
            let dropped: Int
            switch change.kind {
            case .key: dropped = target.dropKey(change.subject) ? 1 : 0
            case .tag: dropped = target.dropTag(change.subject)
            case .all: dropped = target.dropAll()
            }
            let lag = now.subtractingSaturating(change.time)
            lastLag.store(lag, ordering: .relaxed)
            lagTimer.recordMilliseconds(lag)
            applied.add(dropped, ordering: .relaxed)
            if dropped > 0 { appliedCounter.increment(by: Int64(dropped)) }
            // Counted last: a test that waits on it finds the change applied.
            received.add(1, ordering: .releasing)
            receivedCounter.increment()
        }
    }

    /// The cache closed under the poll: no more polls.
    private func stopFromPoll() {
        timer.withLock { timer in
            timer?.cancel()
            timer = nil
        }
    }
}
