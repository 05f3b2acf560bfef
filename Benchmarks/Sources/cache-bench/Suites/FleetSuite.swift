import BenchmarkData
import Foundation

// The fleet suite: several machines' caches sharing a Redis tier, played by three node processes
// (FleetNode.swift) and one redis-server on loopback (RedisServer.swift). The parent drives the
// nodes with line commands, one node at a time unless said, and reports:
//
// - get-or-load latency by where the value came from: memory, disk (memory tier dropped), Redis
//   (a key another node stored, never seen here), the loader (a cold key; the loader returns at
//   once, so this is the misses and the write path), the loader with a load lease; and a Zipf mix
//   of all of them, three nodes in turn on one key space;
// - beside them, in the same rounds, "Redis as the only cache" on the same workload: every
//   get-or-load a GET round trip, and a SET after the loader on a miss, through the harness's
//   own RESP connection (what a Vapor or Hummingbird app's Redis cache driver does);
// - invalidation propagation: node 1 overwrites a key, nodes 2 and 3 note when their memory tier
//   dropped it (CLOCK_MONOTONIC, system-wide);
// - loads per cold key when all three nodes ask for it at the same moment, loader 20 ms, without
//   and with the lease.
//
// Every phase is checked: a value that is not its key's write, a call served by another tier
// than the phase's, a loader that runs for a key Redis holds, a node's write Redis never
// acknowledged, an overwrite not applied within 5 s, a cold key nobody loaded, or a lease that
// let more than one node load without a reason the counts show, fails the run.

struct FleetSuite: Suite {
    let name = "fleet"

    /// The stampede section's loader: a simulated backend call.
    static let stampedeLoaderMilliseconds = 20
    /// Between one stampede key's start and the next's.
    static let stampedeGapNanos: UInt64 = 100_000_000

    /// How much each section does.
    private struct Sizes {
        /// Keys per phase, per node, per round.
        var keys: Int
        var zipfKeys: Int
        /// Zipf get-or-loads per node per round.
        var zipfCalls: Int
        /// Overwrites timed for propagation.
        var events: Int
        /// Cold keys per stampede variant.
        var stampedeKeys: Int

        init(quick: Bool) {
            keys = quick ? 200 : 2_000
            zipfKeys = quick ? 1_000 : 10_000
            zipfCalls = quick ? 2_000 : 20_000
            events = quick ? 30 : 300
            stampedeKeys = quick ? 8 : 40
        }
    }

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        guard let executable = RedisServer.executable() else {
            throw FleetFailure("the fleet suite needs redis-server; \(RedisServer.installHint)")
        }
        let sizes = Sizes(quick: options.quick)
        let rounds = options.repeats()
        let loadAtStart = Self.loadAverage()
        let server = try RedisServer(executable: executable)
        defer { server.stop() }
        let version = (try? Self.redisVersion(port: server.port)) ?? "?"
        let directory = "\(options.scratchDirectory)/cache-bench-fleet-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let namespace = "cache-bench-fleet-\(getpid())"
        var nodes: [FleetNodeProcess] = []
        defer { for node in nodes { node.stop() } }
        for number in 1...3 {
            nodes.append(
                try FleetNodeProcess(
                    number: number, directory: "\(directory)/node-\(number)", port: server.port, namespace: namespace))
        }
        log("fleet: redis-server \(version) on 127.0.0.1:\(server.port), 3 nodes ready")

        // samples[measure][round]: every timed call of the round.
        var samples = [[[UInt64]]](repeating: [], count: FleetMeasure.allCases.count)
        var zipfServed = FleetZipfShares()
        for round in 0..<rounds {
            var roundSamples = [[UInt64]](repeating: [], count: FleetMeasure.allCases.count)
            for system in roundOrder(count: 2, round: round, seed: options.seed, salt: workloadSalt("fleet")) {
                let prefix = system == 0 ? "r\(round)" : "only-r\(round)"
                let zipfSeed = 0x21F0 + UInt64(round)
                if system == 0 {
                    try nodes[0].call("fill \(prefix).present 0 \(sizes.keys)")
                    for node in nodes[1...] {
                        let seed = UInt64(round * 100 + node.number * 10)
                        let phases: [(FleetMeasure, String)] = [
                            (.redis, "\(prefix).present redis"), (.memory, "\(prefix).present memory"),
                            (.disk, "\(prefix).present disk"), (.loader, "\(prefix).cold\(node.number) loader"),
                            (.lease, "\(prefix).leased\(node.number) lease"),
                            (.local, "\(prefix).local\(node.number) local"),
                        ]
                        for (offset, (measure, what)) in phases.enumerated() {
                            let words = what.split(separator: " ")
                            let reply = try node.call(
                                "get \(words[0]) 0 \(sizes.keys) \(words[1]) \(seed + UInt64(offset))")
                            roundSamples[measure.rawValue] += try reply.list("latencies")
                        }
                    }
                    for node in nodes {
                        let reply = try node.call(
                            "zipf \(prefix).zipf \(sizes.zipfKeys) \(sizes.zipfCalls) \(zipfSeed) cache")
                        roundSamples[FleetMeasure.zipf.rawValue] += try reply.list("latencies")
                        zipfServed.memory += Int(try reply.number("memory"))
                        zipfServed.disk += Int(try reply.number("disk"))
                        zipfServed.redis += Int(try reply.number("redis"))
                        zipfServed.loads += Int(try reply.number("loads"))
                    }
                } else {
                    try nodes[0].call("only-fill \(prefix).present 0 \(sizes.keys)")
                    for node in nodes[1...] {
                        let seed = UInt64(round * 100 + node.number * 10)
                        // The same orders as LMDBCache's Redis-served and loader phases.
                        let hits = try node.call("only-get \(prefix).present 0 \(sizes.keys) hit \(seed)")
                        roundSamples[FleetMeasure.onlyHit.rawValue] += try hits.list("latencies")
                        let misses = try node.call(
                            "only-get \(prefix).cold\(node.number) 0 \(sizes.keys) miss \(seed + 3)")
                        roundSamples[FleetMeasure.onlyMiss.rawValue] += try misses.list("latencies")
                    }
                    for node in nodes {
                        let reply = try node.call(
                            "zipf \(prefix).zipf \(sizes.zipfKeys) \(sizes.zipfCalls) \(zipfSeed) only")
                        roundSamples[FleetMeasure.onlyZipf.rawValue] += try reply.list("latencies")
                        zipfServed.onlyHits += Int(try reply.number("hits"))
                        zipfServed.onlyMisses += Int(try reply.number("misses"))
                    }
                }
            }
            for measure in FleetMeasure.allCases {
                samples[measure.rawValue].append(roundSamples[measure.rawValue])
            }
            let line = FleetMeasure.allCases.map { measure in
                "\(measure.short) \(formatNanoseconds(Double(roundSamples[measure.rawValue].percentile(0.5))))"
            }
            log("fleet: round \(round + 1) of \(rounds), p50: " + line.joined(separator: ", "))
        }
        let rows = FleetMeasure.allCases.map { measure in
            Self.row(measure, samples: samples[measure.rawValue], baseline: samples[measure.baseline.rawValue])
        }

        let propagation = try Self.propagation(nodes, events: sizes.events)
        log(
            "fleet: propagation p50 \(formatNanoseconds(Double(propagation[2].percentile(0.5)))), "
                + "p99 \(formatNanoseconds(Double(propagation[2].percentile(0.99))))")
        var stampedes: [FleetStampede] = []
        for lease in [false, true] {
            let before = try nodes.map { try $0.call("stats") }
            let stampede = try Self.stampede(nodes, keys: sizes.stampedeKeys, lease: lease)
            let after = try nodes.map { try $0.call("stats") }
            func delta(_ name: Substring) throws -> Int {
                try zip(before, after).reduce(0) { $0 + Int(try $1.1.number(name)) - Int(try $1.0.number(name)) }
            }
            let stampedeResult = FleetStampede(
                lease: lease, runs: stampede.runs, latencies: stampede.latencies,
                leaseWaits: try delta("leasewaits"), leaseWaitsServed: try delta("leaseserved"),
                failures: try delta("failures"))
            try stampedeResult.check()
            log(
                "fleet: stampede \(lease ? "with" : "without") the lease: "
                    + "\(format(stampedeResult.loadsPerKey, decimals: 2)) loads per key")
            stampedes.append(stampedeResult)
        }
        let statistics = try nodes.map { try $0.call("stats") }
        func total(_ name: Substring) throws -> Int { try statistics.reduce(0) { $0 + Int(try $1.number(name)) } }
        let counts =
            "failures \(try total("failures")), circuit openings \(try total("openings")), writes sent "
            + "\(try total("writes")), dropped \(try total("dropped")), damaged records \(try total("damaged")), "
            + "changes published \(try total("published")), received \(try total("received")), applied "
            + "\(try total("applied")), memory tier drops \(try total("drops"))"
        // Last: the faults leave dropped writes and failures in the counts above's successors.
        let faultMilliseconds = options.quick ? 500 : 3_000
        let faults = FleetFaultSection.report(
            try FleetFaultSection.run(
                node: nodes[1], server: server, keys: sizes.zipfKeys, milliseconds: faultMilliseconds, log: log),
            milliseconds: faultMilliseconds)
        for node in nodes { try node.quit() }
        nodes.removeAll()
        let load =
            "\(loadAtStart) at the start, \(Self.loadAverage()) at the end (/proc/loadavg: 1, 5, 15 minutes; "
            + "this suite's own processes count: up to 3 or 4 while a node calls)"

        return report(
            rows: rows, propagation: propagation, stampedes: stampedes, sizes: sizes, rounds: rounds,
            version: version, counts: counts, zipfServed: zipfServed, load: load, faults: faults)
    }

    /// The row of `measure`: p50 and p99 over every call of every round, ops/s one caller's calls
    /// per second (median over the rounds), and the Redis-only baseline's percentiles over its.
    private static func row(_ measure: FleetMeasure, samples: [[UInt64]], baseline: [[UInt64]]) -> ResultRow {
        let all = samples.flatMap { $0 }
        let theirs = baseline.flatMap { $0 }
        let perRound = samples.map { round in Double(round.count) / (Double(max(round.reduce(0, +), 1)) / 1e9) }
        let p50 = Double(all.percentile(0.50))
        let p99 = Double(all.percentile(0.99))
        var row = ResultRow(
            suite: "fleet", system: measure.system, workload: measure.workload, threads: 1,
            valueBytes: FleetValue.bytes, opsPerSecond: perRound.median, p50Nanoseconds: p50, p99Nanoseconds: p99,
            variant: measure.variant, runsOpsPerSecond: perRound)
        row.calls = all.count
        row.p999Nanoseconds = Double(all.percentile(0.999))
        row.p50VsRedisOnly = p50 > 0 ? Double(theirs.percentile(0.50)) / p50 : nil
        row.p99VsRedisOnly = p99 > 0 ? Double(theirs.percentile(0.99)) / p99 : nil
        return row
    }

    /// Node 1 overwrites one key `events` times; nodes 2 and 3, holding it in memory, each time
    /// note when they dropped it. Returns the lags at node 2, at node 3, and both together.
    private static func propagation(_ nodes: [FleetNodeProcess], events: Int) throws -> [[UInt64]] {
        let writer = nodes[0]
        let watchers = Array(nodes[1...])
        try writer.call("fill propagation 0 1")
        for watcher in watchers { try watcher.call("get propagation 0 1 redis 0") }
        let key = FleetValue.key("propagation", 0)
        var lags = [[UInt64]](repeating: [], count: watchers.count)
        for version in 1...max(events, 1) {
            for watcher in watchers { try watcher.send("watch \(key) 0 \(version)") }
            for watcher in watchers { _ = try watcher.receive() }
            let at = try writer.call("overwrite \(key) 0 \(version)").number("at")
            for (index, watcher) in watchers.enumerated() {
                let seen = try watcher.receive().number("seen")
                lags[index].append(seen > at ? seen - at : 0)
            }
        }
        return lags + [lags.flatMap { $0 }]
    }

    /// All three nodes ask for each of `keys` cold keys at the same moment (one key every
    /// ``stampedeGapNanos``), the loader taking ``stampedeLoaderMilliseconds``.
    private static func stampede(_ nodes: [FleetNodeProcess], keys: Int, lease: Bool) throws
        -> (runs: [Int], latencies: [UInt64])
    {
        let start = nanosecondsNow() + 50_000_000
        let mode = lease ? "lease" : "plain"
        for node in nodes {
            try node.send(
                "stampede stampede-\(mode) \(keys) \(mode) \(start) \(stampedeGapNanos) \(stampedeLoaderMilliseconds)")
        }
        var runs = [Int](repeating: 0, count: keys)
        var latencies: [UInt64] = []
        for node in nodes {
            let reply = try node.receive()
            let mine = try reply.list("runs")
            guard mine.count == keys else { throw FleetFailure("node \(node.number): \(mine.count) stampede keys") }
            for (index, count) in mine.enumerated() { runs[index] += Int(count) }
            latencies += try reply.list("latencies")
        }
        return (runs, latencies)
    }

    /// The first three fields of /proc/loadavg: runnable tasks averaged over 1, 5 and 15 minutes.
    private static func loadAverage() -> String {
        guard let text = try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8) else { return "?" }
        return text.split(separator: " ").prefix(3).joined(separator: " ")
    }

    /// The server's `redis_version`.
    private static func redisVersion(port: UInt16) throws -> String {
        let connection = try RESPConnection(port: port)
        connection.append(Array("INFO".utf8), Array("server".utf8))
        try connection.send()
        let info = String(decoding: try connection.readBulk() ?? [], as: UTF8.self)
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("redis_version:") }
        return line.map { String($0.dropFirst("redis_version:".count)) } ?? "?"
    }

    private func report(
        rows: [ResultRow], propagation: [[UInt64]], stampedes: [FleetStampede], sizes: Sizes, rounds: Int,
        version: String, counts: String, zipfServed: FleetZipfShares, load: String,
        faults: (table: ExtraTable, rows: [ResultRow])
    ) -> SuiteReport {
        let labels = ["node 2", "node 3", "both"]
        let propagationTable = ExtraTable(
            title: "Invalidation propagation: node 1 overwrites a key, nodes 2 and 3 drop it from memory",
            header: ["at", "changes", "p50", "p99", "max"], rightAligned: [1, 2, 3, 4],
            rows: zip(labels, propagation).map { label, lags in
                [
                    label, "\(lags.count)", formatNanoseconds(Double(lags.percentile(0.50))),
                    formatNanoseconds(Double(lags.percentile(0.99))), formatNanoseconds(Double(lags.max() ?? 0)),
                ]
            })
        let propagationRows = zip(labels, propagation).map { label, lags in
            var row = ResultRow(
                suite: name, system: "LMDBCache", workload: "invalidation propagation", threads: 1,
                valueBytes: FleetValue.bytes, opsPerSecond: 0, p50Nanoseconds: Double(lags.percentile(0.50)),
                p99Nanoseconds: Double(lags.percentile(0.99)), variant: label == "both" ? nil : label)
            row.calls = lags.count
            return row
        }
        let loader = "\(Self.stampedeLoaderMilliseconds) ms"
        let stampedeTable = ExtraTable(
            title: "Loads per cold key: three nodes ask at the same moment, loader \(loader)",
            header: [
                "", "keys", "loader runs", "per key", "keys loaded 1x/2x/3x", "waited for the holder", "call p50",
                "call p99",
            ],
            rightAligned: [1, 2, 3, 4, 5, 6, 7],
            rows: stampedes.map { stampede in
                let histogram = (1...3).map { times in "\(stampede.runs.count { $0 == times })" }
                return [
                    stampede.lease ? "with the lease" : "without", "\(stampede.runs.count)",
                    "\(stampede.runs.reduce(0, +))", format(stampede.loadsPerKey, decimals: 2),
                    histogram.joined(separator: "/"),
                    stampede.lease ? "\(stampede.leaseWaitsServed) of \(stampede.leaseWaits)" : "",
                    formatNanoseconds(Double(stampede.latencies.percentile(0.50))),
                    formatNanoseconds(Double(stampede.latencies.percentile(0.99))),
                ]
            })
        let stampedeRows = stampedes.map { stampede in
            var row = ResultRow(
                suite: name, system: "LMDBCache", workload: "cold key, 3 nodes at once, loader \(loader)", threads: 3,
                valueBytes: FleetValue.bytes, opsPerSecond: 0,
                p50Nanoseconds: Double(stampede.latencies.percentile(0.50)),
                p99Nanoseconds: Double(stampede.latencies.percentile(0.99)),
                variant: stampede.lease ? "lease" : "no lease")
            row.calls = stampede.latencies.count
            row.loads = stampede.runs.reduce(0, +)
            row.loadsPerKey = stampede.loadsPerKey
            return row
        }
        let zipfTotal = max(zipfServed.memory + zipfServed.disk + zipfServed.redis + zipfServed.loads, 1)
        func share(_ count: Int, of total: Int) -> String { formatPercent(Double(count) / Double(max(total, 1))) }
        let onlyTotal = zipfServed.onlyHits + zipfServed.onlyMisses
        return SuiteReport(
            suite: name,
            parameters: [
                (
                    "nodes",
                    "3 processes (cache-bench \(FleetNode.flag)), each a Cache<String, [UInt8]> in its default "
                        + "configuration on a directory of its own with configuration.remote = .redis(...) (one "
                        + "endpoint, its defaults: 250 ms command timeout, 2 connections and a subscriber); one node "
                        + "calls at a time, one call at a time, unless said"
                ),
                (
                    "Redis",
                    "redis-server \(version) on loopback TCP, persistence off (the harness's own, RedisServer.swift); "
                        + "Redis only: one connection per node (RESPConnection.swift), one request at a time"
                ),
                (
                    "values",
                    "\(FleetValue.payload.label) (an API response; LMDBCache's records, on disk and in Redis, are "
                        + "compressed), each carrying its key and write; a prepared value the loader copies"
                ),
                (
                    "present keys",
                    "per round node 1 stores \(sizes.keys) keys; nodes 2 and 3 each get-or-load them all three times: "
                        + "served by Redis (never seen there), then by memory, then by disk (after flush() and "
                        + "dropping the memory tier); Redis only: node 1 SETs \(sizes.keys) keys, nodes 2 and 3 GET them"
                ),
                (
                    "cold keys",
                    "per round nodes 2 and 3 each get-or-load \(sizes.keys) keys missing everywhere, with the loader "
                        + "returning at once, and \(sizes.keys) more with Freshness(lease: LoadLease()) (SET NX PX, "
                        + "then GET again), and \(sizes.keys) more on a second cache of the node's without the remote "
                        + "tier (what the tier adds to a miss); Redis only: GET (a miss), the loader, SET"
                ),
                (
                    "Zipf mix",
                    "per round nodes 1, 2, 3 in turn each make \(sizes.zipfCalls) get-or-loads drawn Zipf(0.99) over "
                        + "\(sizes.zipfKeys) keys (a new key space each round; the same draws for both systems); "
                        + "LMDBCache served \(share(zipfServed.memory, of: zipfTotal)) from memory, "
                        + "\(share(zipfServed.disk, of: zipfTotal)) from disk, \(share(zipfServed.redis, of: zipfTotal)) "
                        + "from Redis, \(share(zipfServed.loads, of: zipfTotal)) by the loader; Redis only "
                        + "hit \(share(zipfServed.onlyHits, of: onlyTotal))"
                ),
                (
                    "rounds",
                    "\(rounds), each running LMDBCache's phases and Redis only's in an order drawn from the seed; key "
                        + "orders are seeded and the same every run"
                ),
                (
                    "propagation",
                    "\(propagation[0].count) overwrites of one key by node 1, nodes 2 and 3 holding it in memory and "
                        + "polling every 50 µs"
                ),
                (
                    "stampede",
                    "\(stampedes.first?.runs.count ?? 0) cold keys per variant, one every "
                        + "\(Self.stampedeGapNanos / 1_000_000) ms, all three nodes calling at the same CLOCK_MONOTONIC "
                        + "moment; the loader sleeps \(loader) (a backend call); LoadLease() defaults: held 10 s, "
                        + "waited on 2 s"
                ),
                ("remote tier counts (3 nodes, before the faults)", counts),
                (
                    "faults",
                    "last, on node 2 alone, each fault on a key space of its own (\(sizes.zipfKeys) keys, Zipf 0.99): "
                        + "a warm-up of both systems, then the fault held while LMDBCache, then Redis only, call; healed, "
                        + "the same again at once; the node settles (no write pending, circuit closed, subscribed) "
                        + "before the next. Redis only's connection gives up after 250 ms (the cache's command "
                        + "timeout), connects again after a failure other than an error reply, and answers the loader's value for a failed call"
                ),
                // Four processes share the machine's cores: anything else running shows here.
                ("load average", load),
            ],
            notes: [
                "p50/p99: each call timed on its own (CLOCK_MONOTONIC, from the call to its return), over every call "
                    + "of every round and both calling nodes. ops/s: one caller's calls per second (calls over the "
                    + "sum of their times), median over the rounds. calls: how many were timed.",
                "vs Redis only: Redis only's p50 (p99) on the same workload over this row's: above 1 is faster than "
                    + "Redis as the only cache. Present keys compare with a GET that hits, cold keys with a GET that "
                    + "misses then a SET, the Zipf mix with the same draws through GET and SET.",
                "Redis only is what a Vapor or Hummingbird app's Redis cache driver does: every get a network round "
                    + "trip, a set on a miss. It runs through the harness's blocking RESP connection, without an "
                    + "event loop and without decoding (a driver decodes JSON), so its figures are a floor for such "
                    + "a driver. LMDBCache's Redis calls go through LMDBCacheRedis's SwiftNIO client.",
                "Each phase is checked through the caches' counts (every call served where the phase says, the "
                    + "loader run only for cold keys) and every value against its key and write; a node waits until "
                    + "Redis acknowledged its writes before the next phase. A mismatch fails the run.",
                "Propagation: node 1 takes CLOCK_MONOTONIC just before its insert; nodes 2 and 3 poll their memory "
                    + "tier (contains, every 50 µs) and take it when the entry is gone: the change went through node "
                    + "1's write queue, a pipeline (SET, PUBLISH), Redis pub/sub, the subscriber and the change "
                    + "follower. Each then get-or-loads the key and must get the new write from Redis.",
                "Under faults: memory, disk, Redis, loader are the shares of the phase's calls each served "
                    + "(Redis only: a hit, or the loader after a miss or a failure); failures are the remote tier's "
                    + "count (lookups and writes that failed, or skipped with the circuit open) and Redis only's "
                    + "failed calls. LMDBCache calls first in each phase, so its 'after' starts at the heal and Redis "
                    + "only's a phase later.",
                "Stampede: loader runs summed over the three nodes per key. Without the lease each node that misses "
                    + "loads; with it one node takes the lease and loads, the others poll Redis for its value. A key "
                    + "no node loaded fails the run, as do extra loads with the lease that neither a lease wait "
                    + "ending without the value nor a Redis failure explains.",
            ],
            rows: rows, extraTables: [propagationTable, stampedeTable, faults.table],
            extraRows: propagationRows + stampedeRows + faults.rows)
    }
}

/// One row of the fleet suite's main table.
enum FleetMeasure: Int, CaseIterable {
    case memory, disk, redis, onlyHit, local, loader, lease, onlyMiss, zipf, onlyZipf

    var workload: String {
        switch self {
        case .memory, .disk, .redis, .onlyHit: return "get-or-load, present key"
        case .local, .loader, .lease, .onlyMiss: return "get-or-load, cold key"
        case .zipf, .onlyZipf: return "get-or-load, Zipf mix"
        }
    }

    var system: String {
        switch self {
        case .onlyHit, .onlyMiss, .onlyZipf: return "Redis"
        default: return "LMDBCache"
        }
    }

    var variant: String {
        switch self {
        case .memory: return "served by memory"
        case .disk: return "served by disk"
        case .redis: return "served by Redis"
        case .onlyHit: return "the only cache: GET"
        case .local: return "served by the loader, no remote tier"
        case .loader: return "served by the loader"
        case .lease: return "served by the loader, with the lease"
        case .onlyMiss: return "the only cache: GET, load, SET"
        case .zipf: return "memory, disk, Redis, loader"
        case .onlyZipf: return "the only cache"
        }
    }

    /// Redis only on the same workload.
    var baseline: FleetMeasure {
        switch self {
        case .memory, .disk, .redis, .onlyHit: return .onlyHit
        case .local, .loader, .lease, .onlyMiss: return .onlyMiss
        case .zipf, .onlyZipf: return .onlyZipf
        }
    }

    /// As the progress lines name it.
    var short: String {
        switch self {
        case .memory: return "memory"
        case .disk: return "disk"
        case .redis: return "Redis"
        case .onlyHit: return "only GET"
        case .local: return "loader, no Redis"
        case .loader: return "loader"
        case .lease: return "lease"
        case .onlyMiss: return "only GET+SET"
        case .zipf: return "Zipf"
        case .onlyZipf: return "only Zipf"
        }
    }
}

/// Where the Zipf mix's calls were served, over every node and round: LMDBCache's by tier, Redis
/// only's hits and misses.
struct FleetZipfShares {
    var memory = 0
    var disk = 0
    var redis = 0
    var loads = 0
    var onlyHits = 0
    var onlyMisses = 0
}

/// One stampede variant's outcome.
struct FleetStampede {
    var lease: Bool
    /// Loader runs per key, over the three nodes.
    var runs: [Int]
    /// Every call's time, every node.
    var latencies: [UInt64]
    /// Over the variant, summed over the nodes: lease waits, those the holder's value ended,
    /// remote failures.
    var leaseWaits: Int
    var leaseWaitsServed: Int
    var failures: Int

    var loadsPerKey: Double { Double(runs.reduce(0, +)) / Double(max(runs.count, 1)) }

    /// Throws when a key was loaded by no node, or, with the lease, when more nodes loaded than
    /// lease waits ending without the value and Redis failures explain.
    func check() throws {
        if let index = runs.firstIndex(of: 0) {
            throw FleetFailure("stampede: no node ran the loader for cold key \(index), yet all returned its value")
        }
        guard lease else { return }
        let extra = runs.reduce(0) { $0 + max($1 - 1, 0) }
        let explained = (leaseWaits - leaseWaitsServed) + failures
        if extra > explained {
            throw FleetFailure(
                "stampede with the lease: \(extra) loads beyond one per key, but only \(leaseWaits - leaseWaitsServed) "
                    + "lease waits ended without the value and \(failures) Redis failures (loads per key: \(runs))")
        }
    }
}
