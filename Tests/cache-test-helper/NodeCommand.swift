#if Redis
import Dispatch
import Foundation
import LMDBCache
import LMDBCacheRedis

/// `cache-test-helper node DIR PORT [OPTION=VALUE...]`: one machine of a fleet, a
/// `Cache<String, String>` on DIR with the Redis tier at 127.0.0.1:PORT, driven line by line from
/// stdin, one answer line per command; for the Redis tests across processes.
///
/// Options: `timeout=MS` (command timeout, default 250), `namespace=NS`, `password=PW`,
/// `user=NAME`, `cluster=P2,P3,…` (PORT and these are the seeds of a Redis Cluster),
/// `threshold=N` (failures that open the circuit, default 5), `open=MS` (how long it stays open,
/// default 1000), `retry=MS` (`writeRetryLimit`, default 30000), `missed=both` (`missedChanges:
/// .dropBothTiers`; default the memory tier alone).
///
/// Prints "ready" once the cache is open, then answers:
///
/// | command | does | answers |
/// |---|---|---|
/// | `put K V [TAG...]` | `insert(V, forKey: K, tags:)` | `ok` |
/// | `load K V [TAG...]` | `value(forKey: K) { context in context.tags = TAGs; return V }` | `VALUE loaded=0/1 ms=ELAPSED` |
/// | `leaseload K V MS` | the same with a lease, the loader taking MS milliseconds | `VALUE loaded=0/1 ms=ELAPSED` |
/// | `get K` | `value(forKey: K)` (local tiers) | the value, or `missing` |
/// | `mem K` | the memory tier alone | the value, or `missing` |
/// | `rm K` | `removeValue(forKey: K)` | `ok` |
/// | `rmtag T` | `removeAll(taggedWith: T)` | the count |
/// | `rmall` | `removeAll()` | `ok` |
/// | `flush` | `flush()` | `ok` or `error …` |
/// | `stats` | | `name=value` pairs of ``RemoteStatistics`` (`refused=` writesRefused, `pending=` pendingWrites, `dropped=` writesDropped, `drops=` memoryTierDrops, …) and the loads |
/// | `quit` | closes the cache | `bye` |
enum NodeCommand {
    static func run(directory: URL, arguments: ArraySlice<String>) {
        guard let portText = arguments.first, let port = Int(portText), (1...65_535).contains(port) else {
            fail("usage: node DIR PORT [option=value...]")
        }
        var options: [String: String] = [:]
        for argument in arguments.dropFirst() {
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { fail("bad option \(argument)") }
            options[parts[0]] = parts[1]
        }
        var redis = RedisConfiguration(endpoints: [.init(host: "127.0.0.1", port: port)])
        if let text = options["timeout"], let milliseconds = Int(text) {
            redis.commandTimeout = .milliseconds(milliseconds)
        }
        if let namespace = options["namespace"] { redis.namespace = namespace }
        redis.password = options["password"]
        redis.username = options["user"]
        if let ports = options["cluster"] {
            redis.cluster = true
            redis.endpoints += ports.split(separator: ",").compactMap { Int($0) }.map {
                .init(host: "127.0.0.1", port: $0)
            }
        }
        if let text = options["threshold"], let threshold = Int(text) { redis.failureThreshold = threshold }
        if let text = options["open"], let milliseconds = Int(text) { redis.openDuration = .milliseconds(milliseconds) }
        if options["missed"] == "both" { redis.missedChanges = .dropBothTiers }
        if let text = options["retry"], let milliseconds = Int(text), milliseconds >= 0 {
            redis.writeRetryLimit = .milliseconds(milliseconds)
        }

        var configuration = Cache<String, String>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.remote = .redis(redis)
        let cache: Cache<String, String>
        do {
            cache = try Cache(directory: directory, configuration: configuration)
        } catch {
            fail("cannot open the cache: \(error)")
        }
        answer("ready")
        LineCommands.read { command, operands, line in
            switch (command, operands.count) {
            case ("put", 2...):
                cache.insert(operands[1], forKey: operands[0], tags: Set(operands.dropFirst(2)))
                answer("ok")
            case ("load", 2...):
                answer(load(cache, operands[0], operands[1], tags: Set(operands.dropFirst(2)), freshness: nil, delay: 0))
            case ("leaseload", 3):
                guard let delay = Int(operands[2]), delay >= 0 else {
                    answer("error leaseload K V MS")
                    return
                }
                // Waiters wait for the holder's load as long as a hang (the tests' 300 s): however
                // slow the machine, the loader runs once (a waiter that gave up would run it again).
                let freshness = Freshness(lease: LoadLease(holdFor: .seconds(600), waitFor: .seconds(300)))
                answer(load(cache, operands[0], operands[1], freshness: freshness, delay: delay))
            case ("get", 1):
                answer(cache.value(forKey: operands[0]) ?? "missing")
            case ("mem", 1):
                answer(cache.memory.value(forKey: operands[0]) ?? "missing")
            case ("rm", 1):
                cache.removeValue(forKey: operands[0])
                answer("ok")
            case ("rmtag", 1):
                answer("\(cache.removeAll(taggedWith: operands[0]))")
            case ("rmall", 0):
                cache.removeAll()
                answer("ok")
            case ("flush", 0):
                do {
                    try cache.flush()
                    answer("ok")
                } catch {
                    answer("error \(error)".replacingOccurrences(of: "\n", with: " "))
                }
            case ("stats", 0):
                let statistics = cache.statistics
                let remote = statistics.remote ?? RemoteStatistics()
                answer(
                    [
                        "hits=\(remote.hits)", "misses=\(remote.misses)", "failures=\(remote.failures)",
                        "damaged=\(remote.damagedRecords)", "writes=\(remote.writes)",
                        "dropped=\(remote.writesDropped)", "refused=\(remote.writesRefused)",
                        "pending=\(remote.pendingWrites)", "published=\(remote.changesPublished)",
                        "received=\(remote.changesReceived)", "applied=\(remote.changesApplied)",
                        "drops=\(remote.memoryTierDrops)", "openings=\(remote.circuitOpenings)",
                        "open=\(remote.isCircuitOpen ? 1 : 0)", "subscribed=\(remote.isSubscribed ? 1 : 0)",
                        "leases=\(remote.leasesAcquired)",
                        "waits=\(remote.leaseWaits)", "served=\(remote.leaseWaitsServed)",
                        "loads=\(statistics.loads)",
                    ].joined(separator: " "))
            case ("quit", 0):
                cache.close()
                answer("bye")
                exit(0)
            default:
                answer("error unknown command \(line)")
            }
        }
        cache.close()
        exit(0)
    }

    /// A get-or-load of `key` whose loader answers `value` after `delay` ms, setting the loaded
    /// value's `tags` through its context: "VALUE loaded=0/1 ms=ELAPSED", or "error …".
    static func load(
        _ cache: Cache<String, String>, _ key: String, _ value: String, tags: Set<String> = [], freshness: Freshness?,
        delay: Int
    ) -> String {
        let outcome = Box()
        let done = DispatchSemaphore(value: 0)
        let start = ContinuousClock.now
        Task {
            do {
                let found = try await cache.value(forKey: key, freshness: freshness) { context in
                    outcome.loaded = true
                    if !tags.isEmpty { context.tags = tags }
                    if delay > 0 { try await Task.sleep(for: .milliseconds(delay)) }
                    return value
                }
                outcome.text = found
            } catch {
                outcome.text = "error \(error)".replacingOccurrences(of: "\n", with: " ")
            }
            done.signal()
        }
        done.wait()
        let elapsed = ContinuousClock.now - start
        let milliseconds = elapsed.components.seconds * 1_000 + elapsed.components.attoseconds / 1_000_000_000_000_000
        return "\(outcome.text) loaded=\(outcome.loaded ? 1 : 0) ms=\(milliseconds)"
    }

    /// What one load's task hands back (written before the semaphore is signalled, read after).
    private final class Box: @unchecked Sendable {
        var text = ""
        var loaded = false
    }

    static func answer(_ line: String) { LineCommands.answer(line) }
}
#endif
