import Foundation
@_spi(Diagnostics) import LMDBCache
import Synchronization

// The hit-rate suite: real traces replayed through the memory tier at several capacities (its
// default .adaptive policy and .lru), beside an exact LRU (proving the replay against the published
// figures), the published LRU figures and the published ARC figures (no replay).

struct HitRateSuite: Suite {
    let name = "hitrate"

    /// The bundled trace: Benchmarks/Traces/OLTP.lis.gz, found beside this source file or from the
    /// repository root or Benchmarks/ as the working directory.
    static var bundledTrace: String? {
        let relative = "Traces/OLTP.lis.gz"
        let sourceDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        let candidates = [
            sourceDirectory.appendingPathComponent("../../../\(relative)").standardized.path,
            "Benchmarks/\(relative)", relative,
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    func run(options: Options, log: (String) -> Void) throws -> SuiteReport {
        let request: TraceRequest
        if let trace = options.trace {
            request = trace
        } else if let path = Self.bundledTrace {
            request = TraceRequest(path: path, format: .arc, sizes: nil)
        } else {
            throw TraceFailure(description: "the bundled trace Benchmarks/Traces/OLTP.lis.gz is missing")
        }
        let started = nanosecondsNow()
        let trace = try Trace(path: request.path, format: request.format)
        let unique = Set(trace.ids).count
        let skipped =
            trace.format == .oracle ? "; \(trace.skippedZeroSize) zero-size requests skipped, as libCacheSim does" : ""
        log(
            "hitrate: \(trace.name): \(trace.ids.count) requests, \(unique) objects\(skipped), read in "
                + "\(format(Double(nanosecondsNow() - started) / 1e9, decimals: 1)) s")
        guard let sizes = request.sizes ?? PublishedHitRatios.sizes(trace: trace.name) else {
            throw TraceFailure(description: "no --sizes given and no published sizes for \(trace.name)")
        }
        let byteBounded = trace.format == .oracle
        let traceName = trace.name.replacingOccurrences(of: ".gz", with: "")
        // The published figures are hits over their own count of requests: a file that gives
        // another count (another cut of the trace, or zero-size records counted) cannot be compared.
        let published = sizes.contains {
            PublishedHitRatios.lru(trace: trace.name, capacity: $0) != nil
                || PublishedHitRatios.arc(trace: trace.name, capacity: $0) != nil
        }
        if published, let requests = PublishedHitRatios.requests(trace: trace.name), requests != trace.ids.count {
            throw TraceFailure(
                description: "\(traceName): \(trace.ids.count) requests\(skipped), but the published figures "
                    + "are over \(requests)")
        }

        var rows: [ResultRow] = []
        var diskAccessUpdates: [String] = []
        var windowShares: [String] = []
        for capacity in sizes {
            let reference = PublishedHitRatios.lru(trace: trace.name, capacity: capacity)
            let arc = PublishedHitRatios.arc(trace: trace.name, capacity: capacity)
            var replays: [(system: String, variant: String?, replay: () throws -> (hits: Int, nanoseconds: UInt64))] = [
                (
                    "LMDBCache", nil,
                    {
                        let replay = replayMemoryCache(trace, capacity: capacity, byteBounded: byteBounded, shards: nil)
                        windowShares.append(
                            "\(formatCapacity(capacity, bytes: byteBounded)): "
                                + "\(formatPercent(replay.windowShares.min() ?? 0))–"
                                + "\(formatPercent(replay.windowShares.max() ?? 0)) (mean "
                                + "\(formatPercent(replay.windowShares.reduce(0, +) / Double(replay.windowShares.count))))"
                        )
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
                ("LRU", nil, { replayExactLRU(trace, capacity: capacity) }),
            ]
            // The disk tier, count-bounded traces only (its cost is bytes on disk, not the trace's
            // sizes); with --quick at the smallest capacity only.
            if !byteBounded, !options.quick || capacity == sizes.first {
                replays.append(
                    (
                        "LMDBCache", "disk tier",
                        {
                            let replay = try replayDiskCache(trace, capacity: capacity)
                            diskAccessUpdates.append(
                                "\(formatCapacity(capacity, bytes: false)): "
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
                    capacityUnit: byteBounded ? "bytes" : "entries", variant: variant)
                row.referenceHitRatio = system == "LRU" ? reference : nil
                cell.append(row)
            }
            // ARC is not replayed: its row is the published figure, its own reference.
            if let arc {
                var row = ResultRow(
                    suite: name, system: "ARC", workload: traceName, threads: 1, valueBytes: 0, opsPerSecond: 0,
                    p50Nanoseconds: 0, p99Nanoseconds: 0, capacity: capacity, hitRatio: arc,
                    capacityUnit: byteBounded ? "bytes" : "entries", variant: "published")
                row.referenceHitRatio = arc
                cell.append(row)
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
            log(
                "hitrate: \(traceName) @ \(formatCapacity(capacity, bytes: byteBounded)): "
                    + cell.map { "\($0.label) \(formatPercent($0.hitRatio))" }.joined(separator: ", ")
                    + (reference.map { ", published LRU \(formatPercent($0))" } ?? ""))
            rows += cell
        }
        let shardCounts = sizes.map { capacity in
            let configuration =
                byteBounded
                ? MemoryCache<UInt64, Bool>.Configuration(costLimit: capacity)
                : MemoryCache<UInt64, Bool>.Configuration(countLimit: capacity)
            return "\(formatCapacity(capacity, bytes: byteBounded)): \(configuration.shardCount)"
        }
        let diskUpdates = diskAccessUpdates.isEmpty ? "not run" : diskAccessUpdates.joined(separator: ", ")
        let diskNote: String =
            "LMDBCache (disk tier): a DiskCache alone with countLimit = capacity and lowWaterMark 1 (a trim "
            + "removes only the excess), synchronous durability (each insert commits and trims before the next "
            + "request) on tmpfs, accessTimeGranularity 1 ms and a clock that advances 1 ms per request, so its "
            + "access order is as precise as its relative rule allows (an entry's recorded use is not renewed "
            + "within an eighth of the store's access span). A miss inserts a 1-byte value. Access updates "
            + "committed per hit: \(diskUpdates)."
        var notes: [String] = [
            "Replay: each request is a lookup; a miss inserts the object. hit ratio = hits / requests.",
            "LMDBCache: MemoryCache with its default configuration (policy .adaptive, W-TinyLFU with a "
                + "hill-climbing window): its shards each hold an equal share of the capacity and admit and evict "
                + "on their own. Swift seeds its hashing per process and each cache seeds its frequency sketch "
                + "at random, so keys fall into other shards and sketch counters on every run and this row "
                + "moves a little between runs.",
            "LMDBCache (shards 1): the same with Configuration.shards = 1, one policy over the whole capacity.",
            "Window share: where the adaptive window ended, its share of each shard's capacity, across the default "
                + "configuration's shards (it starts at 20 %): " + windowShares.joined(separator: "; ") + ".",
            "LMDBCache (lru): the default shards with policy .lru: each shard evicts its own least recently used "
                + "entry, so its LRU is approximate across shards. Not quite exact LRU either: a hit on an entry "
                + "among the most recently moved eighth of its shard is not moved again (MemoryShard.markUsed), "
                + "which saves writes on hot keys.",
            "LRU: an exact single-threaded LRU in the harness (Systems/HitRate/ExactLRU.swift).",
            diskNote,

            "reference: the published figure for the row's own policy, trace and capacity "
                + "(Benchmarks/Traces/README.md): on LRU rows the published LRU hit ratio, on ARC (published) rows "
                + "the published ARC hit ratio; empty where there is none (LMDBCache's rows, unpublished sizes).",
        ]
        if rows.contains(where: { $0.system == "ARC" }) {
            notes.append(
                "ARC (published): not replayed (the harness has no ARC): the published ARC hit ratio, as both hit "
                    + "ratio and reference, to show what an adaptive policy gets at the same capacity. Source: "
                    + "\(PublishedHitRatios.arcSource(trace: trace.name)). ops/s and latencies are 0 in --json.")
        }
        if trace.format == .oracle {
            notes.append(
                "Zero-size requests: records of size 0 are skipped and not counted as requests, as libCacheSim's "
                    + "oracleGeneral reader skips them (ignore_size_zero_req, on by default); this trace has "
                    + "\(trace.skippedZeroSize).")
        }
        notes += [
            "vs LMDBCache: hit ratio over LMDBCache's (default configuration) at the same capacity.",
            "ops/s in --json: replay speed (requests per second, one thread), not a comparison.",
        ]
        return SuiteReport(
            suite: name,
            parameters: [
                (
                    "trace",
                    "\(options.trace == nil ? "Benchmarks/Traces/\(trace.name) (bundled)" : request.path) "
                        + "(\(trace.format.rawValue) format): \(trace.ids.count) requests, \(unique) objects\(skipped)"
                ),
                (
                    "capacity",
                    byteBounded
                        ? "bytes; each object costs its size (MemoryCache costLimit, cost = size)"
                        : "entries; each page costs 1 (MemoryCache countLimit)"
                ),
                ("LMDBCache shards", "default configuration on this machine: " + shardCounts.joined(separator: ", ")),
            ],
            notes: notes,
            rows: rows)
    }
}

/// Replays `trace` through a `MemoryCache` of `capacity` entries (or bytes); returns the hits,
/// the time the replay took and where each shard's adaptive window ended.
func replayMemoryCache(
    _ trace: Trace, capacity: Int, byteBounded: Bool, shards: Int?,
    policy: MemoryCache<UInt64, Bool>.Policy = .adaptive
) -> (hits: Int, nanoseconds: UInt64, windowShares: [Double]) {
    var configuration =
        byteBounded
        ? MemoryCache<UInt64, Bool>.Configuration(costLimit: capacity)
        : MemoryCache<UInt64, Bool>.Configuration(countLimit: capacity)
    configuration.shards = shards
    configuration.policy = policy
    configuration.automaticTrimming = false
    let cache = MemoryCache<UInt64, Bool>(configuration: configuration)
    var hits = 0
    let start = nanosecondsNow()
    for index in trace.ids.indices {
        let id = trace.ids[index]
        if cache[id] != nil {
            hits += 1
        } else {
            cache.insert(true, forKey: id, cost: Int(trace.sizes[index]))
        }
    }
    let elapsed = nanosecondsNow() - start
    return (hits, elapsed, cache.windowShares)
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

/// Replays `trace` through ``ExactLRU``.
func replayExactLRU(_ trace: Trace, capacity: Int) -> (hits: Int, nanoseconds: UInt64) {
    var lru = ExactLRU(capacity: capacity)
    var hits = 0
    let start = nanosecondsNow()
    for index in trace.ids.indices where lru.access(trace.ids[index], cost: Int(trace.sizes[index])) {
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
