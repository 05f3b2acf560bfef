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

    // MARK: Lookups

    /// The record in what a value key holds, nil for a tombstone or a foreign value; the version
    /// read moves this cache's clock, so what it writes next is newer.
    private func opened(_ bytes: [UInt8], forKey key: [UInt8]) -> [UInt8]? {
        switch RedisEnvelope(bytes) {
        case .record(let version, let expires, let record):
            versions.observe(version)
            // Past its end of life (its key stays a while longer, as a fence): a miss.
            guard expires == 0 || expires > CacheChange.wallClockNow() else { return nil }
            versionsRead.withLockedValue { read in
                if read.count >= 1_024 { read.removeAll(keepingCapacity: true) }
                read[key] = version
            }
            return Array(record)
        case .tombstone(let version):
            versions.observe(version)
            return nil
        case .foreign:
            return nil
        }
    }

    func record(forKey key: [UInt8], budget: RemoteBudget) async -> [UInt8]? {
        // A removal or write made here and not sent yet: Redis may still hold what it replaced
        // (read back, it would undo this cache's own change here). The loader runs instead.
        if queue.mayHideUnsentChange(forKey: key) {
            count { $0.misses += 1 }
            return nil
        }
        let valueKey = keys.value(key)
        guard let reply = await run([RedisCommand("GET", valueKey, key: valueKey)], budget: budget)?.first else { return nil }
        switch reply {
        case .bulkString(let bytes?):
            guard let record = opened(bytes, forKey: key) else { fallthrough }
            count { $0.hits += 1 }
            metrics.hits.increment()
            return record
        case .bulkString(nil), .null:
            count { $0.misses += 1 }
            metrics.misses.increment()
            return nil
        default:
            // WRONGTYPE and the like: something else wrote the key. A miss, and a failure.
            count { $0.failures += 1 }
            metrics.lookupFailures.increment()
            return nil
        }
    }

    func records(forKeys keys: [[UInt8]], budget: RemoteBudget) async -> [[UInt8]?] {
        var records = [[UInt8]?](repeating: nil, count: keys.count)
        // Keys with a change of this cache's not yet in Redis are not read (as in record(forKey:)).
        let asked = keys.indices.filter { !queue.mayHideUnsentChange(forKey: keys[$0]) }
        guard !asked.isEmpty else { return records }
        let commands = asked.map { index -> RedisCommand in
            let valueKey = self.keys.value(keys[index])
            return RedisCommand("GET", valueKey, key: valueKey)
        }
        guard let replies = await run(commands, budget: budget) else { return records }
        for (index, reply) in zip(asked, replies) {
            if case .bulkString(let bytes?) = reply, let record = opened(bytes, forKey: keys[index]) {
                records[index] = record
                count { $0.hits += 1 }
                metrics.hits.increment()
            } else if case .error = reply {
                // WRONGTYPE and the like, as in record(forKey:): a miss, and a failure.
                count { $0.failures += 1 }
                metrics.lookupFailures.increment()
            } else {
                count { $0.misses += 1 }
                metrics.misses.increment()
            }
        }
        return records
    }

    func lease(forKey key: [UInt8], holdFor: Duration, budget: RemoteBudget) async -> RemoteLease {
        let token = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let leaseKey = keys.lease(key)
        let milliseconds = max(1, holdFor.forTimer.milliseconds)
        guard
            let reply = await run([
                RedisCommand("SET", leaseKey, token, Array("NX".utf8), Array("PX".utf8), Array("\(milliseconds)".utf8), key: leaseKey)
            ], budget: budget)?.first
        else { return .unavailable }
        switch reply {
        case .simpleString:
            count { $0.leasesAcquired += 1 }
            return .acquired(token: token)
        case .bulkString(nil), .null:
            count { $0.leaseWaits += 1 }
            return .heldElsewhere
        default:
            count { $0.failures += 1 }
            return .unavailable
        }
    }

    func waitForRecord(forKey key: [UInt8], timeout wait: Duration, budget: RemoteBudget) async -> [UInt8]? {
        let clock = ContinuousClock()
        let deadline = clock.now + wait.forTimer
        let valueKey = keys.value(key)
        let leaseKey = keys.lease(key)
        var pause = Duration.milliseconds(2)
        while clock.now < deadline {
            // As in record(forKey:): a change made here since may not be in Redis yet.
            if queue.mayHideUnsentChange(forKey: key) { return nil }
            if let replies = await run([
                RedisCommand("GET", valueKey, key: valueKey), RedisCommand("EXISTS", leaseKey, key: leaseKey),
            ], budget: budget), replies.count == 2 {
                if case .bulkString(let bytes?) = replies[0], let record = opened(bytes, forKey: key) {
                    count { $0.leaseWaitsServed += 1 }
                    return record
                }
                // The holder is gone without storing a value (its loader failed, or the value was
                // not cacheable): load here rather than wait out the timeout.
                if case .integer(0) = replies[1] { return nil }
            } else if breaker.isOpen || budget.left <= .zero {
                return nil
            }
            do {
                try await clock.sleep(until: min(clock.now + pause, deadline))
            } catch {
                return nil
            }
            pause = min(pause * 2, .milliseconds(50))
        }
        return nil
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
