#if Redis
import LMDBCache
import RESP

// Lookups: one key, many keys (by slot in a cluster), the load lease and the wait for another
// machine's load; each within its budget, a failure a miss.
extension RedisRemoteStore {
    /// The record in what a value key holds, nil for a tombstone or a foreign value; the version
    /// read moves this cache's clock, so what it writes next is newer.
    fileprivate func opened(_ bytes: [UInt8], forKey key: [UInt8]) -> [UInt8]? {
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
}
#endif
