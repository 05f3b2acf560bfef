import Foundation
@_spi(Diagnostics) import LMDBCache
import Synchronization

// The hit-rate suite: real traces replayed through the memory tier at several capacities (its
// default .adaptive policy and .lru), beside an exact LRU, ARC, LIRS and S3-FIFO (proving the replay
// against the published figures and libCacheSim's), and the published figures of ARC, LIRS and
// S3-FIFO (no replay).

struct HitRateSuite: Suite {
    let name = "hitrate"

    /// The bundled traces, in the order a run replays them: their paths under Benchmarks/ and
    /// formats (Benchmarks/Traces/README.md says where each comes from).
    static let bundledTraces: [(relative: String, format: TraceFormat)] = [
        ("Traces/OLTP.lis.gz", .arc), ("Traces/cloudPhysicsIO.oracleGeneral.bin.gz", .oracle),
    ]

    /// The bundled trace at `relative` (a path under Benchmarks/), found beside this source file or
    /// from the repository root or Benchmarks/ as the working directory.
    static func bundledPath(_ relative: String) -> String? {
        let sourceDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let candidates = [
            sourceDirectory.appendingPathComponent("../../../\(relative)").standardized.path,
            "Benchmarks/\(relative)", relative,
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Every bundled trace at its published sizes.
    static func bundledRequests() throws -> [TraceRequest] {
        try bundledTraces.map { relative, format in
            guard let path = bundledPath(relative) else {
                throw TraceFailure(description: "the bundled trace Benchmarks/\(relative) is missing")
            }
            return TraceRequest(path: path, format: format, sizes: nil, bundled: true)
        }
    }

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let requests = options.traces.isEmpty ? try Self.bundledRequests() : options.traces
        // Before any replay: a trace with no sizes to replay at fails the run at once.
        for request in requests where request.sizes == nil {
            let name = URL(fileURLWithPath: request.path).lastPathComponent
            guard PublishedHitRatios.sizes(trace: name) != nil else {
                throw TraceFailure(description: "no published sizes for \(name): give --sizes after its --trace")
            }
        }
        var replays: [TraceReplay] = []
        for request in requests {
            replays.append(try replay(request, options: options, log: log))
        }
        return report(replays)
    }

    /// Replays one trace at each of its sizes through every system; fails when a check fails
    /// (request count, exact LRU, count-bounded ARC, LIRS and S3-FIFO against libCacheSim on OLTP).
    private func replay(_ request: TraceRequest, options: Options, log: (String) -> Void) throws -> TraceReplay {
        let started = nanosecondsNow()
        let trace = try Trace(path: request.path, format: request.format)
        let unique = Set(trace.ids).count
        let skipped =
            trace.format == .oracle ? "; \(trace.skippedZeroSize) zero-size requests skipped, as libCacheSim does" : ""
        log(
            "hitrate: \(trace.name): \(trace.ids.count) requests, \(unique) objects\(skipped), read in "
                + "\(format(Double(nanosecondsNow() - started) / 1e9, decimals: 1)) s")
        guard let sizes = request.sizes ?? PublishedHitRatios.sizes(trace: trace.name) else {
            throw TraceFailure(description: "no published sizes for \(trace.name): give --sizes after its --trace")
        }
        let byteBounded = trace.format == .oracle
        let traceName = trace.name.replacingOccurrences(of: ".gz", with: "")
        // The published figures are hits over their own count of requests: a file that gives
        // another count (another cut of the trace, or zero-size records counted) cannot be compared.
        let published = sizes.contains {
            PublishedHitRatios.lru(trace: trace.name, capacity: $0) != nil
                || PublishedHitRatios.arc(trace: trace.name, capacity: $0) != nil
                || PublishedHitRatios.lirs(trace: trace.name, capacity: $0) != nil
                || PublishedHitRatios.s3fifo(trace: trace.name, capacity: $0) != nil
                || !PublishedHitRatios.others(trace: trace.name, capacity: $0).isEmpty
        }
        if published, let requests = PublishedHitRatios.requests(trace: trace.name), requests != trace.ids.count {
            throw TraceFailure(
                description: "\(traceName): \(trace.ids.count) requests\(skipped), but the published figures "
                    + "are over \(requests)")
        }

        var result = TraceReplay(
            name: traceName, fileName: trace.name, format: trace.format, byteBounded: byteBounded,
            skippedZeroSize: trace.skippedZeroSize)
        result.description =
            "\(request.bundled ? "Benchmarks/Traces/\(trace.name) (bundled)" : request.path) "
            + "(\(trace.format.rawValue) format): \(trace.ids.count) requests, \(unique) objects\(skipped); capacity "
            + (byteBounded
                ? "in bytes, each object costs its size (MemoryCache costLimit, cost = size)"
                : "in entries, each \(trace.format == .plain ? "key" : "page") costs 1 (MemoryCache countLimit)")
        let unit = byteBounded ? "bytes" : "entries"
        for capacity in sizes {
            let label = formatCapacity(capacity, bytes: byteBounded)
            let reference = PublishedHitRatios.lru(trace: trace.name, capacity: capacity)
            let arc = PublishedHitRatios.arc(trace: trace.name, capacity: capacity)
            // libCacheSim's LIRS and S3-FIFO figures, by system, where there are some.
            let libCacheSim = [
                "LIRS": PublishedHitRatios.lirs(trace: trace.name, capacity: capacity),
                "S3-FIFO": PublishedHitRatios.s3fifo(trace: trace.name, capacity: capacity),
            ].compactMapValues { $0 }
            var replays: [(system: String, variant: String?, replay: () throws -> (hits: Int, nanoseconds: UInt64))] = [
                (
                    "LMDBCache", nil,
                    {
                        let replay = replayMemoryCache(trace, capacity: capacity, byteBounded: byteBounded, shards: nil)
                        let low = replay.windowShares.min() ?? 0
                        let high = replay.windowShares.max() ?? 0
                        let spread =
                            low == high ? "" : " (shards \(formatPercent(low))–\(formatPercent(high)) at the end)"
                        let path = replay.windowPath.map { formatPercent($0) }.joined(separator: " → ")
                        result.windowShares.append("\(label): " + path + spread)
                        return (replay.hits, replay.nanoseconds)
                    }
                ),
                (
                    "LMDBCache", "shards 1",
                    {
                        let replay = replayMemoryCache(trace, capacity: capacity, byteBounded: byteBounded, shards: 1)
                        return (replay.hits, replay.nanoseconds)
                    }
                ),
                (
                    "LMDBCache", "lru",
                    {
                        let replay = replayMemoryCache(
                            trace, capacity: capacity, byteBounded: byteBounded, shards: nil, policy: .lru)
                        return (replay.hits, replay.nanoseconds)
                    }
                ),
                ("LRU", nil, { replayReference(ExactLRU.self, trace, capacity: capacity) }),
                ("ARC", nil, { replayReference(ExactARC.self, trace, capacity: capacity) }),
                ("LIRS", nil, { replayReference(ExactLIRS.self, trace, capacity: capacity) }),
                ("S3-FIFO", nil, { replayReference(ExactS3FIFO.self, trace, capacity: capacity) }),
                ("W-TinyLFU", "static 1%", { replayReference(ExactWTinyLFU.self, trace, capacity: capacity) }),
            ]
            // The disk tier, count-bounded traces only (its cost is bytes on disk, not the trace's
            // sizes); with --quick at the smallest capacity only.
            if !byteBounded, !options.quick || capacity == sizes.first {
                replays.append(
                    (
                        "LMDBCache", "disk tier",
                        {
                            let replay = try replayDiskCache(trace, capacity: capacity)
                            result.diskAccessUpdates.append(
                                "\(label): "
                                    + format(Double(replay.accessUpdates) / Double(max(replay.hits, 1)), decimals: 3))
                            return (replay.hits, replay.nanoseconds)
                        }
                    ))
            }
            var cell: [ResultRow] = []
            for (system, variant, replay) in replays {
                let (hits, nanoseconds) = try replay()
                let requests = trace.ids.count
                var row = ResultRow(
                    suite: name, system: system, workload: traceName, threads: 1, valueBytes: 0,
                    opsPerSecond: Double(requests) / (Double(max(nanoseconds, 1)) / 1e9),
                    p50Nanoseconds: Double(nanoseconds) / Double(requests),
                    p99Nanoseconds: Double(nanoseconds) / Double(requests),
                    capacity: capacity, hitRatio: Double(hits) / Double(requests),
                    capacityUnit: unit, variant: variant)
                switch system {
                case "LRU": row.referenceHitRatio = reference
                case "ARC": row.referenceHitRatio = arc
                default: row.referenceHitRatio = libCacheSim[system]
                }
                cell.append(row)
            }
            // Not replayed: the published figures, each its own reference.
            let publishedRows =
                (arc.map { [(system: "ARC", hitRatio: $0)] } ?? [])
                + PublishedHitRatios.others(trace: trace.name, capacity: capacity)
            for (system, hitRatio) in publishedRows {
                var row = ResultRow(
                    suite: name, system: system, workload: traceName, threads: 1, valueBytes: 0, opsPerSecond: 0,
                    p50Nanoseconds: 0, p99Nanoseconds: 0, capacity: capacity, hitRatio: hitRatio,
                    capacityUnit: unit, variant: "published")
                row.referenceHitRatio = hitRatio
                cell.append(row)
                result.publishedSystems.insert(system)
            }
            cell.computeRatios()
            // The exact LRU must land on the published LRU figure (rounded to 0.01%), or the
            // replay itself is wrong.
            if let reference, let lru = cell.first(where: { $0.system == "LRU" })?.hitRatio,
                abs(lru - reference) > 0.00006
            {
                throw TraceFailure(
                    description: "\(traceName) @ \(capacity): exact LRU replay gives \(formatPercent(lru)), "
                        + "the published LRU figure is \(formatPercent(reference))")
            }
            // The exact ARC, count-bounded as in the paper, must land within 0.05 points of the
            // paper's figure (published to 0.01%); byte-bounded it is only compared (notes).
            if let arc, let replayed = cell.first(where: { $0.system == "ARC" && $0.variant == nil })?.hitRatio {
                if !byteBounded, abs(replayed - arc) > Self.arcTolerance {
                    throw TraceFailure(
                        description: "\(traceName) @ \(capacity): exact ARC replay gives \(formatPercent(replayed)), "
                            + "the published ARC figure is \(formatPercent(arc)) (allowed: "
                            + "±\(format(Self.arcTolerance * 100, decimals: 2)) points)")
                }
                // Byte-bounded figures are published as misses: compare those, exactly.
                let requests = Double(trace.ids.count)
                let misses = { (ratio: Double) in Int(((1 - ratio) * requests).rounded()) }
                result.arcGaps.append(
                    byteBounded
                        ? "\(label): \(misses(replayed)) misses (published \(misses(arc)))"
                        : "\(label): \(formatPoints(replayed - arc))")
            }
            // The exact LIRS and S3-FIFO must land within 0.05 points of libCacheSim's own on OLTP
            // (count-bounded); byte-bounded they are only compared with its published misses (notes).
            for system in ["LIRS", "S3-FIFO"] {
                guard let expected = libCacheSim[system],
                    let replayed = cell.first(where: { $0.system == system && $0.variant == nil })?.hitRatio
                else { continue }
                if PublishedHitRatios.checksLibCacheSim(trace: trace.name),
                    abs(replayed - expected) > Self.libCacheSimTolerance
                {
                    throw TraceFailure(
                        description: "\(traceName) @ \(capacity): exact \(system) replay gives "
                            + "\(formatPercent(replayed)), libCacheSim's \(system) gives \(formatPercent(expected)) "
                            + "(allowed: ±\(format(Self.libCacheSimTolerance * 100, decimals: 2)) points)")
                }
                let requests = Double(trace.ids.count)
                let misses = { (ratio: Double) in Int(((1 - ratio) * requests).rounded()) }
                result.libCacheSimGaps[system, default: []].append(
                    byteBounded
                        ? "\(label): \(misses(replayed)) misses (published \(misses(expected)))"
                        : "\(label): \(formatPoints(replayed - expected))")
            }
            log(
                "hitrate: \(traceName) @ \(label): "
                    + cell.map { "\($0.label) \(formatPercent($0.hitRatio))" }.joined(separator: ", ")
                    + (reference.map { ", published LRU \(formatPercent($0))" } ?? ""))
            result.rows += cell
        }
        result.shardCounts = sizes.map { capacity in
            let configuration =
                byteBounded
                ? MemoryCache<UInt64, Bool>.Configuration(costLimit: capacity)
                : MemoryCache<UInt64, Bool>.Configuration(countLimit: capacity)
            return "\(formatCapacity(capacity, bytes: byteBounded)): \(configuration.shardCount)"
        }
        return result
    }

    /// How far a count-bounded replayed ARC may land from the published figure: 0.05 points.
    static let arcTolerance = 0.0005

    /// How far the replayed LIRS and S3-FIFO may land from libCacheSim's on OLTP: 0.05 points.
    static let libCacheSimTolerance = 0.0005

    /// The suite's report over every trace replayed: parameters, rows, and notes (those that
    /// depend on the trace, once per trace that needs them).
    private func report(_ replays: [TraceReplay]) -> SuiteReport {
        /// `name: items` for each trace that has items, joined with `; `.
        func perTrace(_ items: (TraceReplay) -> [String], separator: String = ", ") -> String {
            replays.filter { !items($0).isEmpty }.map { "\($0.name): " + items($0).joined(separator: separator) }
                .joined(separator: "; ")
        }
        let countBounded = replays.contains { !$0.byteBounded }
        let diskUpdates = perTrace(\.diskAccessUpdates)
        let arcGaps = perTrace(\.arcGaps)
        let lirsGaps = perTrace { $0.libCacheSimGaps["LIRS"] ?? [] }
        let s3fifoGaps = perTrace { $0.libCacheSimGaps["S3-FIFO"] ?? [] }
        var notes: [String] = [
            "Replay: each request is a lookup; a miss inserts the object. hit ratio = hits / requests.",
            "LMDBCache: MemoryCache with its default configuration (policy .adaptive, W-TinyLFU with a "
                + "hill-climbing window): its shards each hold an equal share of the capacity and admit and evict "
                + "on their own. Swift seeds its hashing per process and each cache seeds its frequency sketch "
                + "at random, so keys fall into other shards and sketch counters on every run and this row "
                + "moves a little between runs.",
            "LMDBCache (shards 1): the same with Configuration.shards = 1, one policy over the whole capacity.",
            "Window share: the adaptive window's path, as a share of the capacity (the shards' mean) after each "
                + "tenth of the trace (one climber per cache, starting at 1 %; at the end, the range when shards had "
                + "not all applied its last move): "
                + perTrace(\.windowShares, separator: "; ") + ".",
            "LMDBCache (lru): the default shards with policy .lru: each shard evicts its own least recently used "
                + "entry, so its LRU is approximate across shards. Not quite exact LRU either: a hit on an entry "
                + "among the most recently moved eighth of its shard is not moved again (MemoryShard.markUsed), "
                + "which saves writes on hot keys.",
            "LRU: an exact single-threaded LRU in the harness (Systems/HitRate/ExactLRU.swift); the run fails if it "
                + "is off a published LRU figure by more than its rounding.",
            "ARC: an exact single-threaded ARC in the harness (Systems/HitRate/ExactARC.swift), Megiddo and Modha's "
                + "algorithm (FAST '03, Fig. 4: T1, T2, ghost lists B1, B2, target p, REPLACE), bounded by the same "
                + "capacity as the others. Count-bounded it is the paper's algorithm, and the run fails if it lands "
                + "more than 0.05 points from a published ARC figure. Byte-bounded, every list size and p are in "
                + "bytes, an object larger than the capacity is not cached, a miss evicts until the object fits, "
                + "and p moves on a ghost hit by the paper's ratio of the ghost lists' sizes (here in bytes), one "
                + "byte where the paper moves one page, as libCacheSim's ARC does; it is only compared with "
                + "libCacheSim's published ARC misses, not checked."
                + (arcGaps.isEmpty
                    ? ""
                    : " Replayed against published ARC (count-bounded: the difference in points; byte-bounded: "
                        + "misses, as libCacheSim publishes them): \(arcGaps)."),
            "LIRS: an exact single-threaded LIRS in the harness (Systems/HitRate/ExactLIRS.swift), Jiang and Zhang's "
                + "algorithm (SIGMETRICS '02: LIR set, list Q of resident HIR blocks holding 1 % of the capacity, LIRS "
                + "stack S with stack pruning, non-resident HIR entries kept in S), with libCacheSim's choices where "
                + "the paper leaves one (S bounded at twice the capacity) but the paper's rule where libCacheSim "
                + "departs from it (a hit on a resident HIR block not in S demotes no LIR block; with libCacheSim's "
                + "rule it gives libCacheSim's misses exactly on both bundled traces), bounded by the same capacity "
                + "as the others (byte-bounded, the LIR set's and Q's sizes are in bytes). The run fails if it lands "
                + "more than 0.05 points from libCacheSim's own LIRS on OLTP (libcachesim 0.3.5, "
                + "Benchmarks/Traces/README.md); byte-bounded it is only compared with libCacheSim's published "
                + "LIRS misses."
                + (lirsGaps.isEmpty
                    ? ""
                    : " Replayed against libCacheSim (count-bounded: the difference in points; byte-bounded: "
                        + "misses): \(lirsGaps)."),
            "S3-FIFO: an exact single-threaded S3-FIFO in the harness (Systems/HitRate/ExactS3FIFO.swift), Yang et al.'s "
                + "algorithm (SOSP '23: small FIFO of 10 % of the capacity, main FIFO of 90 %, ghost FIFO of keys as "
                + "large as main, counters capped at 3; the oldest object of small moves to main if hit twice there, "
                + "else is evicted into the ghost; main reinserts its oldest while its counter, decremented each time, "
                + "is above 0), with libCacheSim's S3FIFO rules and defaults (until the first eviction a full small "
                + "sends new objects to main, as libCacheSim's S3FIFO does and its S3FIFOv0, the paper's, does not), "
                + "bounded by the same capacity as the others (byte-bounded, every queue's size is in bytes). The run "
                + "fails if it lands more than 0.05 points from libCacheSim's own S3-FIFO on OLTP (libcachesim 0.3.5); "
                + "byte-bounded it is only compared with libCacheSim's published S3-FIFO misses."
                + (s3fifoGaps.isEmpty
                    ? ""
                    : " Replayed against libCacheSim (count-bounded: the difference in points; byte-bounded: "
                        + "misses): \(s3fifoGaps)."),
            "W-TinyLFU (static 1%): an exact single-threaded W-TinyLFU in the harness "
                + "(Systems/HitRate/ExactWTinyLFU.swift), the policy before adaptation: Einziger, Friedman and "
                + "Manes's (ACM TOS 2017) with the static window of Caffeine's releases up to 2.6 (window 1 %, "
                + "main area 99 % of it 80 % protected, a count-min sketch of 4-bit counters sized to the "
                + "capacity in entries and halved after ten times that many requests, a candidate admitted if "
                + "counted more often than the victim, a warm one (over 5) one time in 128); byte-bounded, its "
                + "sketch grows with the entries held. Written from the paper and Caffeine's design notes; "
                + "not checked against another implementation.",
        ]
        if countBounded {
            notes.append(
                "LMDBCache (disk tier), count-bounded traces only: a DiskCache alone with countLimit = capacity and "
                    + "lowWaterMark 1 (a trim removes only the excess), synchronous durability (each insert commits "
                    + "and trims before the next request) on tmpfs, accessTimeGranularity 1 ms and a clock that "
                    + "advances 1 ms per request, so its access order is as precise as its relative rule allows (an "
                    + "entry's recorded use is not renewed within an eighth of the store's access span). A miss "
                    + "inserts a 1-byte value. With --quick it runs at the first capacity only. Access updates "
                    + "committed per hit: \(diskUpdates.isEmpty ? "not run" : diskUpdates).")
        }
        notes.append(
            "reference: the published figure for the row's own policy, trace and capacity "
                + "(Benchmarks/Traces/README.md): on LRU rows the published LRU hit ratio, on ARC rows (replayed and "
                + "published) the published ARC hit ratio, on LIRS and S3-FIFO rows (replayed and published) "
                + "libCacheSim's own (published for cloudPhysicsIO; for OLTP replayed through libcachesim 0.3.5, no "
                + "published rows); empty where there is none (LMDBCache's rows, unpublished sizes, traces without "
                + "figures).")
        let arcSources = replays.filter { $0.publishedSystems.contains("ARC") }
            .map { "\($0.name): \(PublishedHitRatios.arcSource(trace: $0.fileName))" }
        if !arcSources.isEmpty {
            notes.append(
                "ARC (published): not replayed: the published ARC hit ratio, as both hit ratio and reference, beside "
                    + "the replayed ARC. Sources: \(arcSources.joined(separator: "; ")). ops/s and latencies are 0 "
                    + "in --json, as on every published row.")
        }
        let otherSources = replays.filter { !$0.publishedSystems.subtracting(["ARC"]).isEmpty }.compactMap { replay in
            PublishedHitRatios.othersSource(trace: replay.fileName).map { "\(replay.name): \($0)" }
        }
        if !otherSources.isEmpty {
            notes.append(
                "LIRS (published), S3-FIFO (published): not replayed: libCacheSim's published hit ratios "
                    + "(1 − misses / requests), as both hit ratio and reference, beside the replayed LIRS and S3-FIFO. "
                    + "Sources: \(otherSources.joined(separator: "; ")).")
        }
        for replay in replays where replay.format == .oracle {
            notes.append(
                "Zero-size requests (\(replay.name)): records of size 0 are skipped and not counted as requests, as "
                    + "libCacheSim's oracleGeneral reader skips them (ignore_size_zero_req, on by default); this trace "
                    + "has \(replay.skippedZeroSize).")
        }
        notes += [
            "vs LMDBCache: hit ratio over LMDBCache's (default configuration) at the same trace and capacity.",
            "ops/s in --json: replay speed (requests per second, one thread), not a comparison.",
        ]
        let parameters: [(String, String)] =
            replays.map { ("trace", $0.description) }
            + [("LMDBCache shards", "default configuration on this machine: " + perTrace(\.shardCounts))]
        return SuiteReport(suite: name, parameters: parameters, notes: notes, rows: replays.flatMap(\.rows))
    }
}

/// What replaying one trace gave: its rows and what the report says of it.
private struct TraceReplay {
    /// The trace's file name without `.gz`, as the table's trace column shows it.
    var name: String
    /// The file name as read, which ``PublishedHitRatios`` looks figures up by.
    var fileName: String
    var format: TraceFormat
    var byteBounded: Bool
    var skippedZeroSize: Int
    /// Where it came from, its format, requests and objects, what capacity counts.
    var description = ""
    var rows: [ResultRow] = []
    /// Per capacity: where the default configuration's adaptive windows ended.
    var windowShares: [String] = []
    /// Per capacity: the disk tier's access updates per hit (count-bounded traces).
    var diskAccessUpdates: [String] = []
    /// Per capacity with a published ARC figure: the replayed ARC minus it.
    var arcGaps: [String] = []
    /// Per system (`LIRS`, `S3-FIFO`) and capacity with a libCacheSim figure: the replay minus it.
    var libCacheSimGaps: [String: [String]] = [:]
    /// Per capacity: the default configuration's shard count.
    var shardCounts: [String] = []
    /// The systems with a published row (`ARC`, `LIRS`, `S3-FIFO`).
    var publishedSystems: Set<String> = []
}

/// A difference of hit ratios in percentage points, signed, two decimals: `+0.01`, `-1.23`, `0.00`.
private func formatPoints(_ difference: Double) -> String {
    let text = format(abs(difference) * 100, decimals: 2)
    if text == "0.00" { return text }
    return (difference > 0 ? "+" : "-") + text
}

/// Replays `trace` through a `MemoryCache` of `capacity` entries (or bytes); returns the hits,
/// the time the replay took, where each shard's adaptive window ended, and the window's path: its
/// share (the shards' mean) after each tenth of the trace.
func replayMemoryCache(
    _ trace: Trace, capacity: Int, byteBounded: Bool, shards: Int?,
    policy: MemoryCache<UInt64, Bool>.Policy = .adaptive
) -> (hits: Int, nanoseconds: UInt64, windowShares: [Double], windowPath: [Double]) {
    var configuration =
        byteBounded
        ? MemoryCache<UInt64, Bool>.Configuration(costLimit: capacity)
        : MemoryCache<UInt64, Bool>.Configuration(countLimit: capacity)
    configuration.shards = shards
    configuration.policy = policy
    configuration.automaticTrimming = false
    let cache = MemoryCache<UInt64, Bool>(configuration: configuration)
    var hits = 0
    var path: [Double] = []
    let tenth = max(1, trace.ids.count / 10)
    let start = nanosecondsNow()
    for index in trace.ids.indices {
        let id = trace.ids[index]
        if cache[id] != nil {
            hits += 1
        } else {
            cache.insert(true, forKey: id, cost: Int(trace.sizes[index]))
        }
        if (index + 1) % tenth == 0, path.count < 10 {
            let shares = cache.windowShares
            path.append(shares.reduce(0, +) / Double(max(shares.count, 1)))
        }
    }
    let elapsed = nanosecondsNow() - start
    return (hits, elapsed, cache.windowShares, path)
}

/// Replays a count-bounded `trace` through a `DiskCache` of `capacity` entries on tmpfs; returns
/// the hits, the time the replay took and the access updates the store committed.
func replayDiskCache(_ trace: Trace, capacity: Int) throws -> (hits: Int, nanoseconds: UInt64, accessUpdates: Int64) {
    let clock = ReplayClock()
    var configuration = DiskCache.Configuration(countLimit: capacity)
    configuration.lowWaterMark = 1
    configuration.automaticTrimming = false
    configuration.durability = .synchronous
    configuration.accessTimeGranularity = .milliseconds(1)
    configuration.clock = CacheClock { clock.now }
    let directory = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        .appendingPathComponent("cache-bench-hitrate-\(getpid())-\(capacity)")
    defer { try? FileManager.default.removeItem(at: directory) }
    let disk = try DiskCache(directory: directory, configuration: configuration)
    defer { disk.close() }
    let updatesBefore = AccessUpdates.count
    var hits = 0
    let start = nanosecondsNow()
    for id in trace.ids {
        clock.advance()
        let key = withUnsafeBytes(of: id.littleEndian) { Array($0) }
        if try disk.data(forKey: key) != nil {
            hits += 1
        } else {
            try disk.setData([1], forKey: key)
        }
    }
    let elapsed = nanosecondsNow() - start
    try disk.flush()
    return (hits, elapsed, AccessUpdates.count - updatesBefore)
}

/// Milliseconds that move only when the replay says: one per request.
private final class ReplayClock: Sendable {
    private let milliseconds = Atomic<UInt64>(1_700_000_000_000)

    func advance() { milliseconds.add(1, ordering: .relaxed) }

    /// Half a millisecond past the tick, so the cache's rounding down lands on it.
    var now: Date { Date(timeIntervalSince1970: (Double(milliseconds.load(ordering: .relaxed)) + 0.5) / 1_000) }
}

/// A reference policy the suite replays: a lookup that inserts on a miss, true on a hit.
protocol ReferencePolicy {
    init(capacity: Int)
    /// A policy of `capacity` bytes (`byteBounded`) or entries; most policies need not know.
    init(capacity: Int, byteBounded: Bool)
    mutating func access(_ key: UInt64, cost: Int) -> Bool
}

extension ReferencePolicy {
    init(capacity: Int, byteBounded: Bool) { self.init(capacity: capacity) }
}

extension ExactLRU: ReferencePolicy {}
extension ExactARC: ReferencePolicy {}
extension ExactLIRS: ReferencePolicy {}
extension ExactS3FIFO: ReferencePolicy {}
extension ExactWTinyLFU: ReferencePolicy {}

/// Replays `trace` through a fresh `Policy` of `capacity`.
func replayReference<Policy: ReferencePolicy>(
    _: Policy.Type, _ trace: Trace, capacity: Int
) -> (hits: Int, nanoseconds: UInt64) {
    var policy = Policy(capacity: capacity, byteBounded: trace.format == .oracle)
    var hits = 0
    let start = nanosecondsNow()
    for index in trace.ids.indices where policy.access(trace.ids[index], cost: Int(trace.sizes[index])) {
        hits += 1
    }
    return (hits, nanosecondsNow() - start)
}

/// `1000`, `128M` (128 MiB), `1G`, `64K`: binary suffixes.
func parseSize(_ text: String) -> Int? {
    let multipliers: [Character: Int] = ["K": 1 << 10, "M": 1 << 20, "G": 1 << 30]
    let trimmed = text.trimmingCharacters(in: .whitespaces).uppercased()
    guard let last = trimmed.last else { return nil }
    if let multiplier = multipliers[last] {
        return Int(trimmed.dropLast().replacingOccurrences(of: "I", with: "")).map { $0 * multiplier }
    }
    if trimmed.hasSuffix("MIB") || trimmed.hasSuffix("GIB") || trimmed.hasSuffix("KIB") {
        return parseSize(String(trimmed.dropLast(2)))
    }
    return Int(trimmed.replacingOccurrences(of: "_", with: ""))
}
