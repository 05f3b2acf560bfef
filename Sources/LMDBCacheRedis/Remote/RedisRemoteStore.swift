#if Redis
import Dispatch
import LMDBCache
import Logging
import NIOConcurrencyHelpers
import RESP

/// The Redis tier of one ``LMDBCache/Cache``: lookups, the background writer, load leases and the
/// subscription that brings other machines' changes (``RedisChangeFeed``).
///
/// Nothing here throws at the cache or makes it wait longer than the command timeout: failures are
/// misses and counts, and after ``RedisConfiguration/failureThreshold`` consecutive ones the
/// circuit opens (``CircuitBreaker``).
final class RedisRemoteStore: RemoteStore {
    let executor: any RedisExecutor
    private let subscriber: RedisSubscriber
    let keys: RedisKeys
    /// Where ``Cache/removeAll()`` fences the namespace (`ns:f`), beside each value key.
    let namespaceFence: SlotKeys
    /// The prefixes of the tags' version hashes (`ns:tv`), beside each tag's sorted set
    /// (``tagVersionsKey(_:)``).
    let tagVersions: SlotKeys
    let breaker: CircuitBreaker
    let timeout: Duration
    let origin: UInt64
    /// This cache's versions (``RecordVersion``).
    let versions: VersionClock
    /// How long a write is retried before it is dropped (``RedisConfiguration/writeRetryLimit``).
    let writeRetryLimit: Duration
    /// How long a tombstone stays, in milliseconds.
    let tombstoneMilliseconds: UInt64
    /// ``RedisConfiguration/maximumRecordSize``.
    let maximumRecordSize: Int
    /// Wakes the cache's follower (changes are in ``changeFeed``).
    let wakeFollower: @Sendable () -> Void
    /// The version of the record last read for a key, for ``discardDamaged(forKey:)`` (bounded).
    let versionsRead = NIOLockedValueBox([[UInt8]: RecordVersion]())
    /// Whether a refusal was logged at warning since the last write that landed.
    let inRefusalEpisode = NIOLockedValueBox(false)
    let logger: Logger
    let queue: RedisWriteQueue
    let changeFeed: RedisChangeFeed
    let counts = NIOLockedValueBox(RemoteStatistics())
    let metrics: RemoteMetrics
    /// The writer task's end, for ``close()`` to wait on.
    private let writerDone = DispatchSemaphore(value: 0)

    /// Writes sent per pipeline at most.
    static let pipelineLimit = 256
    /// Bytes sent per pipeline at most, about (one larger write goes alone).
    static let pipelineBytes = 1 << 20

    /// A store over `executor`, subscribed through what `subscriber` makes of its change feed and
    /// the cache's wake-up call; the writer task starts at once.
    init(
        executor: any RedisExecutor,
        subscriber: (RedisChangeFeed, @escaping @Sendable () -> Void) throws -> RedisSubscriber,
        configuration: RedisConfiguration, context: RemoteContext
    ) throws {
        self.executor = executor
        keys = RedisKeys(namespace: configuration.namespace)
        namespaceFence = SlotKeys(keys.namespace + Array(":f".utf8), cluster: configuration.cluster)
        tagVersions = SlotKeys(keys.namespace + Array(":tv".utf8), cluster: configuration.cluster)
        timeout = configuration.commandTimeout.forTimer
        origin = context.origin
        versions = VersionClock(origin: context.origin)
        writeRetryLimit = configuration.writeRetryLimit.forTimer
        tombstoneMilliseconds = (configuration.writeRetryLimit.forTimer + configuration.commandTimeout.forTimer * 2
            + .seconds(5)).milliseconds
        maximumRecordSize = max(0, configuration.maximumRecordSize)
        dropsDiskTierOnMissedChanges = configuration.missedChanges == .dropBothTiers
        logger = context.logger
        let metrics = RemoteMetrics(cacheName: context.cacheName)
        self.metrics = metrics
        breaker = CircuitBreaker(
            threshold: configuration.failureThreshold, openDuration: configuration.openDuration.forTimer, logger: context.logger,
            onChange: { isOpen in metrics.circuitOpen.record(isOpen ? 1 : 0) })
        queue = RedisWriteQueue(limit: configuration.writeQueueLimit)
        let feed = RedisChangeFeed(origin: context.origin)
        changeFeed = feed
        self.subscriber = try subscriber(feed, context.changesArrived)
        wakeFollower = context.changesArrived
        self.subscriber.start()
        let done = writerDone
        Task { [self] in
            await writeLoop()
            done.signal()
        }
    }

    var feed: any ChangeFeed { changeFeed }

    var commandTimeout: Duration { timeout }

    let dropsDiskTierOnMissedChanges: Bool

    var statistics: RemoteStatistics {
        var statistics = counts.withLockedValue { $0 }
        statistics.writesDropped = queue.dropped
        statistics.pendingWrites = queue.unsent
        statistics.circuitOpenings = breaker.openings
        statistics.isCircuitOpen = breaker.isOpen
        statistics.isSubscribed = subscriber.isSubscribed
        return statistics
    }

    // MARK: Writes

    func write(
        _ record: [UInt8], forKey key: [UInt8], keepUntil: UInt64, tags: [[UInt8]], absentSince: UInt64?,
        loadStamp: UInt64?
    ) {
        // A loaded value is as old as its load: versioned by the clock's reading when the load
        // began, so a removal or write made while the loader ran, here or elsewhere, is newer
        // and wins in Redis whichever lands first (a removal's tombstone replaces it; a write
        // replaces it or refuses it). Versioned when it finished, a load that landed before a
        // tag removal made during it outlived the removal.
        let version = loadStamp.map { RecordVersion(stamp: $0, origin: origin) } ?? versions.next()
        enqueue(
            .set(
                key: key, record: record, keepUntil: keepUntil, tags: tags, absentSince: absentSince,
                version: version, queuedAt: CacheChange.wallClockNow()))
    }

    /// Queues `write`; a value the queue drops to make room (its key owed a tombstone) leaves
    /// this cache's tiers too (``dropOwnCopy(of:)``).
    private func enqueue(_ write: RedisWrite) {
        if let dropped = queue.push(write) { dropOwnCopy(of: dropped) }
    }

    func loadStamp() -> UInt64 { versions.next().stamp }

    func remove(forKey key: [UInt8]) {
        enqueue(.remove(key: key, version: versions.next()))
    }

    func discardDamaged(forKey key: [UInt8]) {
        count { $0.damagedRecords += 1 }
        // Only the record read: a tombstone of its version, so a newer value stored since stays.
        guard let version = versionsRead.withLockedValue({ $0.removeValue(forKey: key) }) else { return }
        enqueue(.discard(key: key, version: version))
    }

    func removeAll(taggedWith tag: [UInt8]) {
        enqueue(.removeTag(tag, version: versions.next()))
    }

    func removeAll() {
        enqueue(.removeAll(version: versions.next()))
    }

    func release(_ token: [UInt8], forKey key: [UInt8]) {
        enqueue(.release(key: key, token: token))
    }

    // MARK: Plumbing

    /// Runs `commands` under the breaker, with what `budget` has left as the timeout; nil when
    /// refused, failed or out of time (counted).
    func run(_ commands: [RedisCommand], budget: RemoteBudget) async -> [RESPValue]? {
        // The get-or-load's time for Redis is spent: a miss, not asked (nor Redis's failure).
        guard budget.left > .zero else { return nil }
        // Nothing is read before this cache hears of changes (a value replaced before the
        // subscription was up would never be announced to it): until the first subscription is
        // confirmed, a lookup waits for it within its budget, else misses without asking.
        if !subscriber.firstSubscription.isOpen {
            // An open circuit skips Redis at once, before the wait.
            guard !breaker.isOpen else {
                count { $0.failures += 1 }
                metrics.lookupFailures.increment()
                return nil
            }
            let subscribed = await budget.spend { left in
                await subscriber.firstSubscription.wait(until: .now + left)
            }
            guard subscribed == true else { return nil }
        }
        let admission = breaker.admit()
        guard admission.allowed else {
            count { $0.failures += 1 }
            metrics.lookupFailures.increment()
            return nil
        }
        let outcome = await budget.spend { left -> Result<[RESPValue], any Error> in
            do {
                return .success(try await execute(commands, timeout: min(timeout, left)))
            } catch {
                return .failure(error)
            }
        }
        switch outcome {
        case .success(let replies)?:
            // Answered, but with Redis unable to serve (still loading, a script running, no
            // primary): a failure for the circuit, as a timeout is.
            // The callers count each error reply as a failure (and a miss); in a cluster the
            // other nodes' replies still serve.
            if let refusal = Self.unavailability(in: replies) {
                breaker.failed(admission, refusal)
                logger.debug("Redis could not serve a lookup", metadata: ["error": "\(refusal.message)"])
            } else {
                breaker.succeeded(admission)
            }
            return replies
        case .failure(let error)?:
            breaker.failed(admission, error)
            count { $0.failures += 1 }
            metrics.lookupFailures.increment()
            logger.debug("LMDBCache's Redis lookup failed", metadata: ["error": "\(error)"])
            return nil
        case nil:
            // Spent meanwhile by nobody else (one get-or-load's budget is used in sequence).
            breaker.succeeded(admission)
            return nil
        }
    }

    /// The first error reply among `replies` that says Redis cannot serve now
    /// (``RedisWriteRefusal/meansUnavailable``), if any.
    static func unavailability(in replies: [RESPValue]) -> RedisWriteRefusal? {
        for case .error(let message) in replies {
            let refusal = RedisWriteRefusal(message)
            if refusal.meansUnavailable { return refusal }
        }
        return nil
    }

    /// Runs `commands` as one pipeline within `timeout` (default: the command timeout), the
    /// tier's scripts by digest (``ScriptDigest``): those a node answered `NOSCRIPT` go again in
    /// full, in a second exchange within the same time.
    func execute(_ commands: [RedisCommand], timeout: Duration? = nil) async throws -> [RESPValue] {
        let deadline = ContinuousClock.now + (timeout ?? self.timeout)
        var replies = try await exchange(commands.map(ScriptDigest.bySHA), until: deadline)
        let missing = replies.indices.filter { ScriptDigest.isMissingScript(replies[$0]) }
        guard !missing.isEmpty else { return replies }
        let again = try await exchange(missing.map { commands[$0] }, until: deadline)
        for (index, reply) in zip(missing, again) { replies[index] = reply }
        return replies
    }

    private func exchange(_ commands: [RedisCommand], until deadline: ContinuousClock.Instant) async throws -> [RESPValue] {
        let left = ContinuousClock.now.duration(to: deadline)
        guard left > .zero else { throw RedisClientError.timedOut }
        let replies = try await executor.execute(commands, timeout: left)
        guard replies.count == commands.count else {
            throw RedisClientError.protocolViolation("\(replies.count) replies to \(commands.count) commands")
        }
        return replies
    }

    func count(_ body: (inout RemoteStatistics) -> Void) {
        counts.withLockedValue(body)
    }

    func close() {
        queue.close()
        let executor = executor
        let subscriber = subscriber
        // Called from a task (async code), it must not block: the writer needs one of Swift
        // concurrency's threads to finish, and a machine may have only two (two caches closing
        // at once would hold both for the whole wait). The queued writes then go out in the
        // background, as far as Redis answers.
        let inTask = withUnsafeCurrentTask { $0 != nil }
        if !inTask {
            // Called from a thread of its own (a shutdown hook): the queued writes get until
            // about two command timeouts to go out; a Redis that is down costs no more.
            let milliseconds = Int(clamping: timeout.milliseconds.multipliedReportingOverflow(by: 2).partialValue)
            _ = writerDone.wait(timeout: .now() + .milliseconds(max(10, min(milliseconds, 60_000))))
        }
        let done = writerDone
        Task {
            // After the writer (from a task: it was not waited for above), bounded by its retries:
            // once closed, a write Redis does not take is dropped.
            if inTask { await Self.wait(for: done) }
            await subscriber.close()
            await executor.close()
        }
    }

    /// Waits for `semaphore`'s signal without holding a Swift concurrency thread.
    private static func wait(for semaphore: DispatchSemaphore) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                semaphore.wait()
                continuation.resume()
            }
        }
    }
}
#endif
