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
    private let executor: any RedisExecutor
    private let subscriber: RedisSubscriber
    private let keys: RedisKeys
    private let breaker: CircuitBreaker
    private let timeout: Duration
    private let origin: UInt64
    private let logger: Logger
    private let queue: RedisWriteQueue
    private let changeFeed: RedisChangeFeed
    private let counts = NIOLockedValueBox(RemoteStatistics())
    private let metrics: RemoteMetrics
    /// The writer task's end, for ``close()`` to wait on.
    private let writerDone = DispatchSemaphore(value: 0)

    /// Writes sent per pipeline at most.
    static let pipelineLimit = 256

    /// A store over `executor`, subscribed through what `subscriber` makes of its change feed and
    /// the cache's wake-up call; the writer task starts at once.
    init(
        executor: any RedisExecutor,
        subscriber: (RedisChangeFeed, @escaping @Sendable () -> Void) throws -> RedisSubscriber,
        configuration: RedisConfiguration, context: RemoteContext
    ) throws {
        self.executor = executor
        keys = RedisKeys(namespace: configuration.namespace)
        timeout = configuration.commandTimeout.forTimer
        origin = context.origin
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
        self.subscriber.start()
        let done = writerDone
        Task { [self] in
            await writeLoop()
            done.signal()
        }
    }

    var feed: any ChangeFeed { changeFeed }

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

    func record(forKey key: [UInt8]) async -> [UInt8]? {
        // A removal or write made here and not sent yet: Redis may still hold what it replaced
        // (read back, it would undo this cache's own change here). The loader runs instead.
        if queue.mayHideUnsentChange(forKey: key) {
            count { $0.misses += 1 }
            return nil
        }
        let valueKey = keys.value(key)
        guard let reply = await run([RedisCommand("GET", valueKey, key: valueKey)])?.first else { return nil }
        switch reply {
        case .bulkString(let bytes?):
            count { $0.hits += 1 }
            metrics.hits.increment()
            return bytes
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

    func lease(forKey key: [UInt8], holdFor: Duration) async -> RemoteLease {
        let token = (0..<16).map { _ in UInt8.random(in: .min ... .max) }
        let leaseKey = keys.lease(key)
        let milliseconds = max(1, holdFor.forTimer.milliseconds)
        guard
            let reply = await run([
                RedisCommand("SET", leaseKey, token, Array("NX".utf8), Array("PX".utf8), Array("\(milliseconds)".utf8), key: leaseKey)
            ])?.first
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

    func waitForRecord(forKey key: [UInt8], timeout wait: Duration) async -> [UInt8]? {
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
            ]), replies.count == 2 {
                if case .bulkString(let bytes?) = replies[0] {
                    count { $0.leaseWaitsServed += 1 }
                    return bytes
                }
                // The holder is gone without storing a value (its loader failed, or the value was
                // not cacheable): load here rather than wait out the timeout.
                if case .integer(0) = replies[1] { return nil }
            } else if breaker.isOpen {
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

    func write(_ record: [UInt8], forKey key: [UInt8], keepUntil: UInt64, tags: [[UInt8]], onlyIfAbsent: Bool) {
        queue.push(.set(key: key, record: record, keepUntil: keepUntil, tags: tags, onlyIfAbsent: onlyIfAbsent))
    }

    func remove(forKey key: [UInt8]) {
        queue.push(.remove(key: key))
    }

    func discardDamaged(forKey key: [UInt8]) {
        count { $0.damagedRecords += 1 }
        queue.push(.discard(key: key))
    }

    func removeAll(taggedWith tag: [UInt8]) {
        queue.push(.removeTag(tag))
    }

    func removeAll() {
        queue.push(.removeAll)
    }

    func release(_ token: [UInt8], forKey key: [UInt8]) {
        queue.push(.release(key: key, token: token))
    }

    /// Sends the queue's writes until it is closed and empty: pipelines of consecutive plain
    /// writes, and each lookup-needing one on its own, each retried while the circuit is open
    /// (after its open period) until it succeeds, or the store closes.
    private func writeLoop() async {
        while let batch = await queue.next(upTo: Self.pipelineLimit) {
            var start = 0
            while start < batch.count {
                var end = start + 1
                if !batch[start].needsLookup {
                    while end < batch.count && !batch[end].needsLookup { end += 1 }
                }
                let segment = Array(batch[start..<end])
                start = end
                await send(segment)
                queue.finished(segment)
            }
        }
    }

    /// Sends `writes` until Redis acknowledges them, waiting out the circuit's open periods; gives
    /// up (counted as dropped) once the store is closing and Redis does not answer.
    private func send(_ writes: [RedisWrite]) async {
        while true {
            let admission = breaker.admit()
            if admission.allowed {
                do {
                    let published = try await perform(writes)
                    breaker.succeeded(admission)
                    count {
                        $0.writes += writes.count
                        $0.changesPublished += published
                    }
                    metrics.writesSent.increment(by: Int64(writes.count))
                    return
                } catch {
                    breaker.failed(admission, error)
                    count { $0.failures += 1 }
                    metrics.writesFailed.increment(by: Int64(writes.count))
                    logger.debug("LMDBCache could not send writes to Redis", metadata: ["error": "\(error)"])
                }
            }
            if queue.isClosed {
                queue.countDropped(writes.count)
                return
            }
            let retryAt = breaker.retryAt
            let clock = ContinuousClock()
            // Closed but failing: a short pause before the next try, not a tight loop.
            let until = max(retryAt, clock.now + .milliseconds(10))
            try? await clock.sleep(until: until)
        }
    }

    /// Runs `writes` (one pipeline, or a lookup then a pipeline); returns how many changes it
    /// published.
    private func perform(_ writes: [RedisWrite]) async throws -> Int {
        var commands: [RedisCommand] = []
        var published = 0
        /// Where the only-if-absent scripts are among `commands`.
        var conditionalWrites: [Int] = []
        let now = CacheChange.wallClockNow()
        for write in writes {
            switch write {
            case .set(let key, let record, let keepUntil, let tags, let onlyIfAbsent):
                let valueKey = keys.value(key)
                let expired = keepUntil != 0 && keepUntil <= now
                if expired && onlyIfAbsent { continue }
                let change = CacheChange(kind: .key, origin: origin, time: now, subject: key).encoded
                if onlyIfAbsent {
                    conditionalWrites.append(commands.count)
                    commands.append(
                        RedisCommand(
                            "EVAL", Self.setIfAbsentScript, Array("1".utf8), valueKey, record,
                            Array("\(keepUntil)".utf8), keys.channel, change, key: valueKey))
                } else {
                    if expired {
                        commands.append(RedisCommand("DEL", valueKey, key: valueKey))
                    } else if keepUntil == 0 {
                        commands.append(RedisCommand("SET", valueKey, record, key: valueKey))
                    } else {
                        commands.append(
                            RedisCommand(
                                "SET", valueKey, record, Array("PXAT".utf8), Array("\(keepUntil)".utf8), key: valueKey))
                    }
                    commands.append(RedisCommand("PUBLISH", keys.channel, change))
                }
                // After the value: a tag removal racing this write either finds the key in the
                // set (and removes it) or leaves it in the set for the next one.
                for tag in tags where !expired {
                    let tagKey = keys.tag(tag)
                    commands.append(
                        RedisCommand(
                            "EVAL", Self.tagScript, Array("1".utf8), tagKey, key, Array("\(keepUntil)".utf8),
                            key: tagKey))
                }
                published += 1
            case .remove(let key):
                let valueKey = keys.value(key)
                commands.append(RedisCommand("DEL", valueKey, key: valueKey))
                commands.append(publish(.key, key, now))
                published += 1
            case .discard(let key):
                let valueKey = keys.value(key)
                commands.append(RedisCommand("DEL", valueKey, key: valueKey))
            case .release(let key, let token):
                let leaseKey = keys.lease(key)
                commands.append(
                    RedisCommand(
                        "EVAL", Self.releaseScript, Array("1".utf8), leaseKey, token, key: leaseKey))
            case .removeTag(let tag):
                try await removeTagged(tag)
                commands.append(publish(.tag, tag, now))
                published += 1
            case .removeAll:
                try await removeNamespace()
                commands.append(publish(.all, [], now))
                published += 1
            }
        }
        let replies = try await execute(commands)
        // A write only-if-absent published only when its script stored it (1).
        for index in conditionalWrites where replies[index] != .integer(1) { published -= 1 }
        if let failure = replies.first(where: { if case .error = $0 { return true } else { return false } }),
            case .error(let message) = failure
        {
            logger.debug("Redis refused a write", metadata: ["error": "\(String(decoding: message, as: UTF8.self))"])
        }
        return published
    }

    /// Deletes the entries in `tag`'s set and removes them from it, a page at a time (SSCAN), so
    /// no reply or pipeline grows with the set: a set of any size is removed within bounded
    /// replies, each exchange under the command timeout. Members added meanwhile may be removed
    /// too (an extra miss, never a stale value).
    private func removeTagged(_ tag: [UInt8]) async throws {
        let tagKey = keys.tag(tag)
        var cursor: [UInt8] = Array("0".utf8)
        repeat {
            let replies = try await execute([
                RedisCommand("SSCAN", tagKey, cursor, Array("COUNT".utf8), Array("1000".utf8), key: tagKey)
            ])
            guard case .array(let parts?)? = replies.first, parts.count == 2,
                case .bulkString(let next?) = parts[0]
            else { throw RedisClientError.protocolViolation("unexpected SSCAN reply") }
            var members: [[UInt8]] = []
            switch parts[1] {
            case .array(let values?), .set(let values):
                for case .bulkString(let member?) in values { members.append(member) }
            default:
                throw RedisClientError.protocolViolation("unexpected SSCAN reply")
            }
            cursor = next
            guard !members.isEmpty else { continue }
            var commands = members.map { member -> RedisCommand in
                let valueKey = keys.value(member)
                return RedisCommand("DEL", valueKey, key: valueKey)
            }
            commands.append(RedisCommand([Array("SREM".utf8), tagKey] + members, key: tagKey))
            _ = try await execute(commands)
        } while cursor != Array("0".utf8)
    }

    /// Deletes every key of the namespace: `SCAN` on each primary, then `DEL` in pipelines. A
    /// primary that does not answer fails the removal (the writer retries it).
    private func removeNamespace() async throws {
        let pattern = Self.globEscaped(keys.namespace) + Array(":*".utf8)
        for node in try await executor.everyPrimary() {
            var cursor: [UInt8] = Array("0".utf8)
            repeat {
                let replies = try await node.execute(
                    [RedisCommand("SCAN", cursor, Array("MATCH".utf8), pattern, Array("COUNT".utf8), Array("1000".utf8))],
                    timeout: timeout)
                guard replies.count == 1, case .array(let parts?) = replies[0], parts.count == 2,
                    case .bulkString(let next?) = parts[0], case .array(let found?) = parts[1]
                else { throw RedisClientError.protocolViolation("unexpected SCAN reply") }
                cursor = next
                let names = found.compactMap { value -> [UInt8]? in
                    if case .bulkString(let name?) = value { return name } else { return nil }
                }
                if !names.isEmpty { _ = try await execute(names.map { RedisCommand("DEL", $0, key: $0) }) }
            } while cursor != Array("0".utf8)
        }
    }

    /// `bytes` with the glob pattern's special characters escaped.
    static func globEscaped(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var escaped: [UInt8] = []
        for byte in bytes {
            if byte == UInt8(ascii: "*") || byte == UInt8(ascii: "?") || byte == UInt8(ascii: "[")
                || byte == UInt8(ascii: "]") || byte == UInt8(ascii: "\\")
            {
                escaped.append(UInt8(ascii: "\\"))
            }
            escaped.append(byte)
        }
        return escaped
    }

    /// Adds a key (ARGV[1]) to a tag's set (KEYS[1]) and keeps the set as long as its longest-lived
    /// member: no expiry for a member kept forever (ARGV[2] = 0), else at least until ARGV[2]
    /// (ms since 1970). So sets of tags whose entries all expired go too. Needs Redis 7.0
    /// (`PEXPIRETIME`).
    private static let tagScript = Array(
        """
        local added = redis.call('SADD', KEYS[1], ARGV[1])
        local keep = tonumber(ARGV[2])
        if keep == 0 then
          redis.call('PERSIST', KEYS[1])
        else
          local expiry = redis.call('PEXPIRETIME', KEYS[1])
          if (expiry == -1 and redis.call('SCARD', KEYS[1]) == 1) or (expiry >= 0 and expiry < keep) then
            redis.call('PEXPIREAT', KEYS[1], keep)
          end
        end
        return added
        """.utf8)

    /// Stores a record (ARGV[1]) under KEYS[1] until ARGV[2] (0: no end) only if the key holds
    /// none, and then publishes the change (ARGV[4]) on the channel (ARGV[3]).
    private static let setIfAbsentScript = Array(
        """
        local stored
        if ARGV[2] == '0' then
          stored = redis.call('SET', KEYS[1], ARGV[1], 'NX')
        else
          stored = redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PXAT', ARGV[2])
        end
        if stored then
          redis.call('PUBLISH', ARGV[3], ARGV[4])
          return 1
        end
        return 0
        """.utf8)

    /// Deletes the lease key only while it still holds the caller's token.
    private static let releaseScript = Array(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end".utf8)

    private func publish(_ kind: CacheChange.Kind, _ subject: [UInt8], _ now: UInt64) -> RedisCommand {
        RedisCommand(
            "PUBLISH", keys.channel, CacheChange(kind: kind, origin: origin, time: now, subject: subject).encoded)
    }

    // MARK: Plumbing

    /// Runs `commands` under the breaker and the timeout; nil when refused or failed (counted).
    private func run(_ commands: [RedisCommand]) async -> [RESPValue]? {
        let admission = breaker.admit()
        guard admission.allowed else {
            count { $0.failures += 1 }
            metrics.lookupFailures.increment()
            return nil
        }
        do {
            let replies = try await execute(commands)
            breaker.succeeded(admission)
            return replies
        } catch {
            breaker.failed(admission, error)
            count { $0.failures += 1 }
            metrics.lookupFailures.increment()
            logger.debug("LMDBCache's Redis lookup failed", metadata: ["error": "\(error)"])
            return nil
        }
    }

    private func execute(_ commands: [RedisCommand]) async throws -> [RESPValue] {
        let replies = try await executor.execute(commands, timeout: timeout)
        guard replies.count == commands.count else {
            throw RedisClientError.protocolViolation("\(replies.count) replies to \(commands.count) commands")
        }
        return replies
    }

    private func count(_ body: (inout RemoteStatistics) -> Void) {
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
