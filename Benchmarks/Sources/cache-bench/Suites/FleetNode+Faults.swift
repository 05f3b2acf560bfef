import Foundation
import LMDBCache

// The fleet suite's fault section, on the node's side: a Zipf mix of get-or-loads for a stretch
// of time while the parent holds Redis in a fault, and after it heals; LMDBCache's cache beside
// Redis as the only cache on a connection of its own that, as a driver does, gives up after the
// cache's command timeout and connects again after a failure (not after an error reply).

extension FleetNodeCommands {
    /// Redis only's reply timeout: the cache's default command timeout.
    static let faultTimeoutMilliseconds = 250

    /// Zipf get-or-loads for `milliseconds` (draws in chunks of 20,000, each chunk's seed the
    /// next): every value checked, no wait for Redis's acknowledgements (Redis may refuse them).
    func faultZipf(_ prefix: Substring, keys: Int, milliseconds: Int, seed: UInt64) async throws -> String {
        var latencies: [UInt64] = []
        let before = FleetCounts(cache)
        let end = nanosecondsNow() + UInt64(milliseconds) * 1_000_000
        var chunk: UInt64 = 0
        draw: while true {
            for index in FleetValue.zipf(keys: keys, count: 20_000, seed: seed &+ chunk, node: node) {
                guard nanosecondsNow() < end else { break draw }
                let key = FleetValue.key(prefix, index)
                let start = nanosecondsNow()
                let value = try await cache.value(forKey: key) { FleetValue.make(index: index, version: 0) }
                latencies.append(nanosecondsNow() - start)
                try FleetValue.check(value, key: key, index: index, version: 0)
            }
            chunk += 1
        }
        let counts = FleetCounts(cache) - before
        return "latencies=\(list(latencies)) memory=\(counts.memoryHits) disk=\(counts.diskHits) "
            + "redis=\(counts.remoteHits) loads=\(counts.loads) failures=\(counts.remoteFailures)"
    }

    /// Redis only's side of ``faultZipf(_:keys:milliseconds:seed:)``: GET, on a miss the loader
    /// then SET; a failure (no answer within ``faultTimeoutMilliseconds``, an error reply, a
    /// refused or closed connection) answers the loader's value, as a driver that falls back to
    /// the backend would, and all but an error reply close the connection.
    func onlyFaultZipf(_ prefix: Substring, keys: Int, milliseconds: Int, seed: UInt64) throws -> String {
        var latencies: [UInt64] = []
        var hits = 0
        var errors = 0
        let end = nanosecondsNow() + UInt64(milliseconds) * 1_000_000
        var chunk: UInt64 = 0
        draw: while true {
            for index in FleetValue.zipf(keys: keys, count: 20_000, seed: seed &+ chunk, node: node) {
                guard nanosecondsNow() < end else { break draw }
                let start = nanosecondsNow()
                do {
                    if try onlyFaultGetOrLoad(prefix, index) { hits += 1 }
                } catch let failure as FleetFailure {
                    throw failure
                } catch {
                    // A timeout or a lost connection leaves the connection out of step: a driver
                    // connects again. An error reply (`-OOM`) does not.
                    if (error as? RedisFailure)?.isErrorReply != true { faultConnection = nil }
                    errors += 1
                    _ = FleetValue.make(index: index, version: 0)
                }
                latencies.append(nanosecondsNow() - start)
            }
            chunk += 1
        }
        return "latencies=\(list(latencies)) hits=\(hits) misses=\(latencies.count - hits - errors) errors=\(errors)"
    }

    private func onlyFaultGetOrLoad(_ prefix: Substring, _ index: Int) throws -> Bool {
        let connection: RESPConnection
        if let faultConnection {
            connection = faultConnection
        } else {
            connection = try RESPConnection(port: port)
            try connection.setTimeout(milliseconds: Self.faultTimeoutMilliseconds)
            faultConnection = connection
        }
        let key = onlyKey(prefix, index)
        connection.append(Self.getCommand, key)
        try connection.send()
        if let value = try connection.readBulk() {
            try FleetValue.check(value, key: FleetValue.key(prefix, index), index: index, version: 0)
            return true
        }
        connection.append(Self.setCommand, key, FleetValue.make(index: index, version: 0))
        try connection.send()
        try connection.readSimple()
        return false
    }

    /// Waits (up to 30 s) until the cache has no write pending, its circuit is closed and it is
    /// subscribed: the next fault starts from a healthy tier.
    func settle() async throws -> String {
        let deadline = nanosecondsNow() + 30_000_000_000
        while true {
            guard let remote = cache.statistics.remote else { throw FleetFailure("the cache has no remote tier") }
            if remote.pendingWrites == 0 && !remote.isCircuitOpen && remote.isSubscribed { return "" }
            guard nanosecondsNow() < deadline else {
                throw FleetFailure(
                    "not settled within 30 s: \(remote.pendingWrites) writes pending, circuit "
                        + "\(remote.isCircuitOpen ? "open" : "closed"), subscribed \(remote.isSubscribed)")
            }
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}
