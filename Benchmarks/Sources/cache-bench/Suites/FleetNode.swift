import Dispatch
import Foundation
import LMDBCache
import LMDBCacheRedis
import Synchronization

// A node of the fleet suite (FleetSuite.swift): this executable run again as
// `cache-bench --fleet-node --node N --dir D --port P --namespace NS`, dispatched from the top of
// main.swift. It opens a `Cache<String, [UInt8]>` on its own directory with the Redis tier
// (`configuration.remote = .redis(...)`, namespace NS, on 127.0.0.1:P), and a RESP connection of
// the harness's own (RESPConnection.swift) for "Redis as the only cache". It says `ready`, then
// runs the parent's commands, one line each, in order, and answers each with one line, `ok ...`
// (fields `name=value`, lists comma-separated) or `error MESSAGE` (then it exits with status 1):
//
//   fill PREFIX FROM COUNT            insert keys PREFIX:FROM ..< PREFIX:FROM+COUNT (write 0), then
//                                     wait until Redis acknowledged every write this node queued
//   get PREFIX FROM COUNT TIER SEED   get-or-load those keys in a seeded order, each timed; TIER
//                                     says where they must be served: memory, disk (the memory
//                                     tier is dropped first), redis (another node stored them),
//                                     loader (cold keys), lease (cold keys, with a load lease),
//                                     local (cold keys, on a second cache of the node's without
//                                     the remote tier: what the tier adds to a miss). The cache's
//                                     counts must agree, and every value be its key's
//   only-fill PREFIX FROM COUNT       SET those keys through the plain RESP connection
//   only-get PREFIX FROM COUNT hit|miss SEED
//                                     the same get-or-load done as a Redis-only cache does it: GET,
//                                     and on a miss the loader then SET
//   zipf PREFIX KEYS CALLS SEED cache|only
//                                     CALLS get-or-loads drawn Zipf(0.99) over KEYS keys, through
//                                     the cache or Redis alone
//   watch KEY INDEX VERSION           KEY (in memory, write VERSION - 1) is about to be overwritten
//                                     by another node: answers `ok` at once, polls every 50 µs
//                                     until the memory tier no longer holds it, then answers with
//                                     that moment (CLOCK_MONOTONIC) once a get-or-load returned
//                                     write VERSION from Redis (its loader may not run)
//   overwrite KEY INDEX VERSION       insert write VERSION of KEY, answering with the moment just
//                                     before the insert, once Redis acknowledged it
//   stampede PREFIX COUNT plain|lease START GAP LOADMS
//                                     key k (cold everywhere) is asked for at START + k x GAP
//                                     (CLOCK_MONOTONIC, all nodes at once), its loader taking
//                                     LOADMS; answers each key's loader runs here and each call's time.
//                                     It does not wait for its writes: a load another node's change
//                                     superseded is neither stored nor sent, so the node can no
//                                     longer tell how many writes to wait for, and fill, get and
//                                     zipf are refused after it
//   stats                             the remote tier's counts
//   quit                              close the cache, answer `ok`, exit 0

/// The node process of the fleet suite.
enum FleetNode {
    static let flag = "--fleet-node"

    /// A node's command line (after the executable).
    static func arguments(node: Int, directory: String, port: UInt16, namespace: String) -> [String] {
        [flag, "--node", "\(node)", "--dir", directory, "--port", "\(port)", "--namespace", namespace]
    }

    /// Runs the node with the arguments after ``flag`` and exits: 0 after `quit`, 1 with a
    /// message on standard error (and an `error` line to the parent, when it can).
    static func main(_ arguments: ArraySlice<String>) -> Never {
        do {
            try run(arguments)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("cache-bench \(flag): \(error)\n".utf8))
            exit(1)
        }
    }

    private static func run(_ arguments: ArraySlice<String>) throws {
        var values: [String: String] = [:]
        var rest = arguments
        while let name = rest.popFirst() {
            guard name.hasPrefix("--"), let value = rest.popFirst(), values[name] == nil else {
                throw FleetFailure("bad arguments: \(arguments.joined(separator: " "))")
            }
            values[name] = value
        }
        func text(_ name: String) throws -> String {
            guard let value = values.removeValue(forKey: name) else { throw FleetFailure("\(name) is missing") }
            return value
        }
        let nodeText = try text("--node")
        let directory = try text("--dir")
        let portText = try text("--port")
        let namespace = try text("--namespace")
        guard values.isEmpty else { throw FleetFailure("unknown arguments \(values.keys.sorted())") }
        guard let node = Int(nodeText), (1...99).contains(node) else { throw FleetFailure("--node \(nodeText)") }
        guard let port = UInt16(portText), port > 0 else { throw FleetFailure("--port \(portText)") }

        var configuration = Cache<String, [UInt8]>.Configuration()
        configuration.name = "node-\(node)"
        configuration.remote = .redis(
            RedisConfiguration(endpoints: [.init(host: "127.0.0.1", port: Int(port))], namespace: namespace))
        let cache = try Cache<String, [UInt8]>(
            directory: URL(fileURLWithPath: directory), configuration: configuration)
        defer { cache.close() }
        // The same cache without the remote tier, for the `local` phase.
        var localConfiguration = Cache<String, [UInt8]>.Configuration()
        localConfiguration.name = "node-\(node)-local"
        let local = try Cache<String, [UInt8]>(
            directory: URL(fileURLWithPath: directory + "-local"), configuration: localConfiguration)
        defer { local.close() }
        let commands = FleetNodeCommands(
            node: node, cache: cache, local: local, only: try RESPConnection(port: port),
            onlyPrefix: namespace + "-only:", port: port)
        try writeLine("ready")
        while let line = readLine() {
            if line == "quit" {
                cache.close()
                local.close()
                try writeLine("ok")
                return
            }
            do {
                let reply = try commands.perform(line)
                try writeLine(reply.isEmpty ? "ok" : "ok " + reply)
            } catch {
                let message = "\(error)".replacingOccurrences(of: "\n", with: " ")
                _ = writeIgnoringSIGPIPE(1, "error node \(node): \(message)\n")
                throw error
            }
        }
        throw FleetFailure("the parent closed standard input without quit")
    }

    /// Writes a line to the parent.
    static func writeLine(_ text: String) throws {
        guard writeIgnoringSIGPIPE(1, text + "\n") else { throw POSIXFailure("write to the parent") }
    }
}

/// Where a phase's get-or-loads must be served.
enum FleetTier: String, CaseIterable, Sendable {
    case memory, disk, redis, loader, lease, local
}

/// The node's commands. One runs at a time: the main thread reads a command, runs it (its async
/// part on a task it waits for) and answers before reading the next, so the state below is never
/// touched by two threads at once.
final class FleetNodeCommands: @unchecked Sendable {
    /// This node's number (1, 2, 3): its Zipf draws are its own.
    let node: Int
    let cache: Cache<String, [UInt8]>
    /// A cache of the node's without the remote tier (the `local` phase).
    private let local: Cache<String, [UInt8]>
    /// "Redis as the only cache": the harness's own RESP connection, one request at a time.
    private let only: RESPConnection
    let onlyPrefix: String
    /// The Redis port, for the connections ``faultZipf`` makes again after a failure.
    let port: UInt16
    /// Redis only's connection under faults (FleetNode+Faults.swift): made on demand, with the
    /// cache's command timeout, and made again after any failure, as a driver does.
    var faultConnection: RESPConnection?
    /// Inserts this node made: with its loads and leases, what its remote tier must acknowledge.
    private var inserts = 0
    /// Whether a stampede ran: the writes to wait for are no longer known.
    private var writesUnknown = false

    init(
        node: Int, cache: Cache<String, [UInt8]>, local: Cache<String, [UInt8]>, only: RESPConnection,
        onlyPrefix: String, port: UInt16
    ) {
        self.port = port
        self.node = node
        self.cache = cache
        self.local = local
        self.only = only
        self.onlyPrefix = onlyPrefix
    }

    /// Runs one command line; returns the reply's fields.
    func perform(_ line: String) throws -> String {
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard let name = words.first else { throw FleetFailure("an empty command") }
        func number(_ index: Int) throws -> Int {
            guard index < words.count, let value = Int(words[index]), value >= 0 else {
                throw FleetFailure("\(quoted(line)): argument \(index) is not a count")
            }
            return value
        }
        func word(_ index: Int) throws -> Substring {
            guard index < words.count, !words[index].isEmpty else {
                throw FleetFailure("\(quoted(line)): argument \(index) is missing")
            }
            return words[index]
        }
        func arity(_ count: Int) throws {
            guard words.count == count + 1 else { throw FleetFailure("\(quoted(line)): \(count) arguments expected") }
        }
        switch name {
        case "fill":
            try arity(3)
            let (prefix, from, count) = (try word(1), try number(2), try number(3))
            return try blocking { try await self.fill(prefix, from: from, count: count) }
        case "get":
            try arity(5)
            let (prefix, from, count) = (try word(1), try number(2), try number(3))
            guard let tier = FleetTier(rawValue: String(try word(4))) else { throw FleetFailure("no tier \(words[4])") }
            let seed = UInt64(try number(5))
            return try blocking { try await self.get(prefix, from: from, count: count, tier: tier, seed: seed) }
        case "only-fill":
            try arity(3)
            return try onlyFill(try word(1), from: try number(2), count: try number(3))
        case "only-get":
            try arity(5)
            let expected = try word(4)
            guard expected == "hit" || expected == "miss" else { throw FleetFailure("hit or miss, not \(expected)") }
            return try onlyGet(
                try word(1), from: try number(2), count: try number(3), hits: expected == "hit",
                seed: UInt64(try number(5)))
        case "zipf":
            try arity(5)
            let (prefix, keys, calls, seed) = (try word(1), try number(2), try number(3), UInt64(try number(4)))
            guard keys > 0 else { throw FleetFailure("zipf over no keys") }
            switch try word(5) {
            case "cache": return try blocking { try await self.zipf(prefix, keys: keys, calls: calls, seed: seed) }
            case "only": return try onlyZipf(prefix, keys: keys, calls: calls, seed: seed)
            default: throw FleetFailure("cache or only, not \(words[5])")
            }
        case "watch":
            try arity(3)
            return try watch(String(try word(1)), index: try number(2), version: UInt64(try number(3)))
        case "overwrite":
            try arity(3)
            let (key, index, version) = (String(try word(1)), try number(2), UInt64(try number(3)))
            return try blocking { try await self.overwrite(key, index: index, version: version) }
        case "stampede":
            try arity(6)
            let (prefix, count, mode) = (try word(1), try number(2), try word(3))
            guard mode == "plain" || mode == "lease" else { throw FleetFailure("plain or lease, not \(mode)") }
            let (start, gap, loadMilliseconds) = (UInt64(try number(4)), UInt64(try number(5)), try number(6))
            return try blocking {
                try await self.stampede(
                    prefix, count: count, lease: mode == "lease", start: start, gap: gap,
                    loadMilliseconds: loadMilliseconds)
            }
        case "fault-zipf":
            try arity(5)
            let (prefix, keys, milliseconds, seed) = (try word(1), try number(2), try number(3), UInt64(try number(4)))
            guard keys > 0, milliseconds > 0 else { throw FleetFailure("fault-zipf over no keys or no time") }
            switch try word(5) {
            case "cache":
                return try blocking {
                    try await self.faultZipf(prefix, keys: keys, milliseconds: milliseconds, seed: seed)
                }
            case "only": return try onlyFaultZipf(prefix, keys: keys, milliseconds: milliseconds, seed: seed)
            default: throw FleetFailure("cache or only, not \(words[5])")
            }
        case "settle":
            try arity(0)
            return try blocking { try await self.settle() }
        case "stats":
            try arity(0)
            let remote = try remoteStatistics()
            return [
                "hits=\(remote.hits)", "misses=\(remote.misses)", "failures=\(remote.failures)",
                "damaged=\(remote.damagedRecords)", "writes=\(remote.writes)", "dropped=\(remote.writesDropped)",
                "published=\(remote.changesPublished)", "received=\(remote.changesReceived)",
                "applied=\(remote.changesApplied)", "drops=\(remote.memoryTierDrops)",
                "openings=\(remote.circuitOpenings)", "leases=\(remote.leasesAcquired)",
                "leasewaits=\(remote.leaseWaits)", "leaseserved=\(remote.leaseWaitsServed)",
            ].joined(separator: " ")
        default:
            throw FleetFailure("unknown command \(quoted(line))")
        }
    }

    // MARK: LMDBCache

    private func fill(_ prefix: Substring, from: Int, count: Int) async throws -> String {
        for index in from..<(from + count) {
            cache.insert(FleetValue.make(index: index, version: 0), forKey: FleetValue.key(prefix, index))
        }
        inserts += count
        try await awaitRemoteWrites()
        return ""
    }

    private func get(_ prefix: Substring, from: Int, count: Int, tier: FleetTier, seed: UInt64) async throws
        -> String
    {
        if tier == .disk {
            // What a get-or-load stored is committed, then only the disk tier holds it.
            try cache.flush()
            cache.memory.removeAll()
        }
        let order = FleetValue.order(from: from, count: count, seed: seed)
        let freshness = tier == .lease ? Freshness(lease: LoadLease()) : nil
        let loaderRuns = RunCounter()
        var latencies: [UInt64] = []
        latencies.reserveCapacity(count)
        let target = tier == .local ? local : cache
        let before = FleetCounts(target)
        for index in order {
            let key = FleetValue.key(prefix, index)
            let start = nanosecondsNow()
            let value = try await target.value(forKey: key, freshness: freshness) {
                loaderRuns.count.add(1, ordering: .relaxed)
                return FleetValue.make(index: index, version: 0)
            }
            latencies.append(nanosecondsNow() - start)
            try FleetValue.check(value, key: key, index: index, version: 0)
        }
        let counts = FleetCounts(target) - before
        let runs = loaderRuns.count.load(ordering: .relaxed)
        let wrong: String? =
            switch tier {
            case .memory:
                counts.memoryHits == count && runs == 0 && counts.remoteLookups == 0
                    ? nil : "\(counts.memoryHits) memory hits"
            case .disk:
                counts.diskHits == count && counts.memoryHits == 0 && runs == 0 && counts.remoteLookups == 0
                    ? nil : "\(counts.diskHits) disk hits"
            case .redis:
                counts.remoteHits == count && runs == 0 && counts.diskHits == 0
                    ? nil : "\(counts.remoteHits) Redis hits"
            case .loader:
                runs == count && counts.loads == count && counts.remoteMisses == count && counts.leases == 0
                    ? nil : "\(counts.remoteMisses) Redis misses"
            case .lease:
                runs == count && counts.loads == count && counts.leases == count ? nil : "\(counts.leases) leases taken"
            case .local:
                runs == count && counts.loads == count && counts.memoryHits == 0 && counts.diskHits == 0
                    ? nil : "\(counts.loads) loads"
            }
        if let wrong {
            throw FleetFailure(
                "\(count) get-or-loads to be served by \(tier.rawValue): \(wrong), \(runs) loader runs (\(counts))")
        }
        if tier == .loader || tier == .lease { try await awaitRemoteWrites() }
        return "latencies=" + list(latencies)
    }

    private func zipf(_ prefix: Substring, keys: Int, calls: Int, seed: UInt64) async throws -> String {
        let draws = FleetValue.zipf(keys: keys, count: calls, seed: seed, node: node)
        var latencies: [UInt64] = []
        latencies.reserveCapacity(calls)
        let before = FleetCounts(cache)
        for index in draws {
            let key = FleetValue.key(prefix, index)
            let start = nanosecondsNow()
            let value = try await cache.value(forKey: key) { FleetValue.make(index: index, version: 0) }
            latencies.append(nanosecondsNow() - start)
            try FleetValue.check(value, key: key, index: index, version: 0)
        }
        let counts = FleetCounts(cache) - before
        try await awaitRemoteWrites()
        return "latencies=\(list(latencies)) memory=\(counts.memoryHits) disk=\(counts.diskHits) "
            + "redis=\(counts.remoteHits) loads=\(counts.loads)"
    }

    private func watch(_ key: String, index: Int, version: UInt64) throws -> String {
        guard version > 0 else { throw FleetFailure("watch \(key): version 0") }
        var pause = timespec(tv_sec: 0, tv_nsec: 50_000)
        // The last round's read may have left the memory tier without the value: an invalidation
        // of that round's write arriving after the read began keeps the read from storing it
        // (as it should). Read it again until this tier holds it, as a watcher would.
        let holding = nanosecondsNow() + 5_000_000_000
        while !cache.memory.contains(key) {
            guard nanosecondsNow() < holding else {
                throw FleetFailure("watch \(key): not in the memory tier before the overwrite within 5 s")
            }
            try blocking {
                let value = try await self.cache.value(forKey: key) { () -> [UInt8] in
                    throw FleetFailure("watch \(key): the loader ran: Redis did not hold write \(version - 1)")
                }
                try FleetValue.check(value, key: key, index: index, version: version - 1)
            }
            if !cache.memory.contains(key) { nanosleep(&pause, nil) }
        }
        try FleetNode.writeLine("ok")
        let deadline = nanosecondsNow() + 5_000_000_000
        while cache.memory.contains(key) {
            guard nanosecondsNow() < deadline else {
                throw FleetFailure("watch \(key): write \(version) by another node not applied here within 5 s")
            }
            nanosleep(&pause, nil)
        }
        let seen = nanosecondsNow()
        try blocking {
            let value = try await self.cache.value(forKey: key) { () -> [UInt8] in
                throw FleetFailure("watch \(key): the loader ran: Redis did not hold write \(version)")
            }
            try FleetValue.check(value, key: key, index: index, version: version)
        }
        return "seen=\(seen)"
    }

    private func overwrite(_ key: String, index: Int, version: UInt64) async throws -> String {
        let value = FleetValue.make(index: index, version: version)
        let at = nanosecondsNow()
        cache.insert(value, forKey: key)
        inserts += 1
        try await awaitRemoteWrites()
        return "at=\(at)"
    }

    private func stampede(
        _ prefix: Substring, count: Int, lease: Bool, start: UInt64, gap: UInt64, loadMilliseconds: Int
    ) async throws -> String {
        let freshness = lease ? Freshness(lease: LoadLease()) : Freshness()
        var runs: [UInt64] = []
        var latencies: [UInt64] = []
        for index in 0..<count {
            let due = start + UInt64(index) * gap
            // Sleep to 1 ms before, then spin: every node calls within microseconds of the others.
            let now = nanosecondsNow()
            if due > now + 1_000_000 { try await Task.sleep(for: .nanoseconds(Int64(due - now - 1_000_000))) }
            while nanosecondsNow() < due {}
            let key = FleetValue.key(prefix, index)
            let ran = RunCounter()
            let begin = nanosecondsNow()
            let value = try await cache.value(forKey: key, freshness: freshness) {
                ran.count.add(1, ordering: .relaxed)
                try await Task.sleep(for: .milliseconds(loadMilliseconds))
                return FleetValue.make(index: index, version: 0)
            }
            latencies.append(nanosecondsNow() - begin)
            try FleetValue.check(value, key: key, index: index, version: 0)
            runs.append(UInt64(ran.count.load(ordering: .relaxed)))
        }
        writesUnknown = true
        return "runs=\(list(runs)) latencies=\(list(latencies))"
    }

    /// Waits (up to 10 s) until Redis acknowledged every write and lease release this node
    /// queued: its inserts, its loaders' values, its leases. A dropped write is a failure.
    private func awaitRemoteWrites() async throws {
        guard !writesUnknown else { throw FleetFailure("after a stampede the writes to wait for are not known") }
        let deadline = nanosecondsNow() + 10_000_000_000
        while true {
            let statistics = cache.statistics
            guard let remote = statistics.remote else { throw FleetFailure("the cache has no remote tier") }
            let expected = inserts + statistics.loads + remote.leasesAcquired + remote.damagedRecords
            guard remote.writesDropped == 0 else {
                throw FleetFailure("the remote tier dropped \(remote.writesDropped) writes")
            }
            if remote.writes >= expected { return }
            guard nanosecondsNow() < deadline else {
                throw FleetFailure("Redis acknowledged \(remote.writes) of \(expected) writes within 10 s")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    private func remoteStatistics() throws -> RemoteStatistics {
        guard let remote = cache.statistics.remote else { throw FleetFailure("the cache has no remote tier") }
        return remote
    }

    // MARK: Redis as the only cache

    static let getCommand = Array("GET".utf8)
    static let setCommand = Array("SET".utf8)

    /// The baseline's Redis key for key `index` under `prefix`.
    func onlyKey(_ prefix: Substring, _ index: Int) -> [UInt8] {
        Array((onlyPrefix + FleetValue.key(prefix, index)).utf8)
    }

    private func onlyFill(_ prefix: Substring, from: Int, count: Int) throws -> String {
        for index in from..<(from + count) {
            only.append(Self.setCommand, onlyKey(prefix, index), FleetValue.make(index: index, version: 0))
            try only.send()
            try only.readSimple()
        }
        return ""
    }

    /// A Redis-only cache's get-or-load: GET; on a miss the loader, then SET (awaited, as a
    /// cache driver's `set` is). Returns whether it hit.
    @inline(__always)
    private func onlyGetOrLoad(_ prefix: Substring, _ index: Int) throws -> Bool {
        let key = onlyKey(prefix, index)
        only.append(Self.getCommand, key)
        try only.send()
        if let value = try only.readBulk() {
            try FleetValue.check(value, key: FleetValue.key(prefix, index), index: index, version: 0)
            return true
        }
        only.append(Self.setCommand, key, FleetValue.make(index: index, version: 0))
        try only.send()
        try only.readSimple()
        return false
    }

    private func onlyGet(_ prefix: Substring, from: Int, count: Int, hits: Bool, seed: UInt64) throws -> String {
        var latencies: [UInt64] = []
        latencies.reserveCapacity(count)
        for index in FleetValue.order(from: from, count: count, seed: seed) {
            let start = nanosecondsNow()
            let hit = try onlyGetOrLoad(prefix, index)
            latencies.append(nanosecondsNow() - start)
            guard hit == hits else {
                throw FleetFailure("Redis only: \(FleetValue.key(prefix, index)) \(hit ? "hit" : "missed")")
            }
        }
        return "latencies=" + list(latencies)
    }

    private func onlyZipf(_ prefix: Substring, keys: Int, calls: Int, seed: UInt64) throws -> String {
        var latencies: [UInt64] = []
        latencies.reserveCapacity(calls)
        var hits = 0
        for index in FleetValue.zipf(keys: keys, count: calls, seed: seed, node: node) {
            let start = nanosecondsNow()
            if try onlyGetOrLoad(prefix, index) { hits += 1 }
            latencies.append(nanosecondsNow() - start)
        }
        return "latencies=\(list(latencies)) hits=\(hits) misses=\(calls - hits)"
    }

    // MARK: Plumbing

    func list(_ values: [UInt64]) -> String { values.map(String.init).joined(separator: ",") }

    /// Runs `body` on a task and waits for it on this thread (the main thread, which has nothing
    /// else to do meanwhile): the cooperative pool stays free for the cache's own tasks.
    func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Outcome<T>()
        let done = DispatchSemaphore(value: 0)
        Task {
            do {
                outcome.result = .success(try await body())
            } catch {
                outcome.result = .failure(error)
            }
            done.signal()
        }
        done.wait()
        guard let result = outcome.result else { throw FleetFailure("a command ended without a result") }
        return try result.get()
    }
}

/// Loader runs, counted from inside the loaders.
private final class RunCounter: Sendable {
    let count = Atomic<Int>(0)
}

/// A task's result, handed to the thread waiting on it: written before the semaphore is
/// signalled, read after the wait.
private final class Outcome<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

/// The counts a phase is checked against: where the cache's get-or-loads were served.
struct FleetCounts: CustomStringConvertible {
    var memoryHits = 0
    var diskHits = 0
    var remoteHits = 0
    var remoteMisses = 0
    var loads = 0
    var leases = 0
    /// Redis lookups and writes that failed (timed out, refused, skipped with the circuit open).
    var remoteFailures = 0

    /// The counts of `cache` now (the remote tier's 0 when it has none).
    init(_ cache: Cache<String, [UInt8]>) {
        let statistics = cache.statistics
        memoryHits = statistics.memory.hits
        diskHits = statistics.disk.hits
        remoteHits = statistics.remote?.hits ?? 0
        remoteMisses = statistics.remote?.misses ?? 0
        loads = statistics.loads
        leases = statistics.remote?.leasesAcquired ?? 0
        remoteFailures = statistics.remote?.failures ?? 0
    }

    private init() {}

    /// Lookups that reached the remote tier.
    var remoteLookups: Int { remoteHits + remoteMisses }

    static func - (after: FleetCounts, before: FleetCounts) -> FleetCounts {
        var counts = FleetCounts()
        counts.memoryHits = after.memoryHits - before.memoryHits
        counts.diskHits = after.diskHits - before.diskHits
        counts.remoteHits = after.remoteHits - before.remoteHits
        counts.remoteMisses = after.remoteMisses - before.remoteMisses
        counts.loads = after.loads - before.loads
        counts.leases = after.leases - before.leases
        counts.remoteFailures = after.remoteFailures - before.remoteFailures
        return counts
    }

    var description: String {
        "memory hits \(memoryHits), disk hits \(diskHits), Redis hits \(remoteHits), Redis misses \(remoteMisses), "
            + "loads \(loads), leases \(leases), Redis failures \(remoteFailures)"
    }
}
