import Foundation
import LMDBCache

// The coherence suite's section on tag removal: what `Cache.removeAll(taggedWith:)` costs per
// entry, on a cache holding 100, 10,000 and 100,000 entries with the tag among untagged ones,
// beside removing the same entries one key at a time (`removeValue(forKey:)` each, then flush()).

struct TagRemovalSection {
    let quick: Bool

    /// Tagged entries per measurement (with --quick the largest is left out).
    var sizes: [Int] { quick ? [100, 10_000] : [100, 10_000, 100_000] }
    /// Untagged entries the cache holds throughout.
    var untagged: Int { quick ? 10_000 : 100_000 }
    /// Runs of each measurement; the report gives their median.
    let runs = 3
    static let valueBytes = 100

    struct Result {
        var parameters: [(String, String)]
        var notes: [String]
        var table: ExtraTable
        var rows: [ResultRow]
    }

    func run(options: Options, log: (String) -> Void) throws -> Result {
        let directory = "\(options.scratchDirectory)/cache-bench-tags-\(getpid())"
        try? FileManager.default.removeItem(atPath: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let cache = try Cache<String, [UInt8]>(
            directory: URL(fileURLWithPath: directory), configuration: .init())
        defer { cache.close() }
        let value = [UInt8](repeating: 0x2E, count: Self.valueBytes)
        for index in 0..<untagged { cache.insert(value, forKey: "plain:\(index)") }
        try cache.flush()
        log("tags: \(untagged) untagged entries, \(runs) runs of each size")

        var byTag: [Int: [UInt64]] = [:]
        var byKey: [Int: [UInt64]] = [:]
        for run in 0..<runs {
            for size in sizes {
                let tag = "group:\(size)"
                let keys = (0..<size).map { "tagged:\(size):\($0)" }
                func fill() throws {
                    for key in keys { cache.insert(value, forKey: key, tags: [tag]) }
                    try cache.flush()
                    try check(cache, count: untagged + size, "after inserting \(size) tagged entries")
                }

                try fill()
                var start = nanosecondsNow()
                let removed = cache.removeAll(taggedWith: tag)
                byTag[size, default: []].append(nanosecondsNow() - start)
                guard removed == size else {
                    throw TagRemovalFailure("removeAll(taggedWith: \(tag)) removed \(removed) of \(size) entries")
                }
                try cache.flush()
                try check(cache, count: untagged, "after removeAll(taggedWith: \(tag))")
                guard !cache.contains(keys[0]), !cache.contains(keys[size - 1]) else {
                    throw TagRemovalFailure("removeAll(taggedWith: \(tag)) left an entry it removed")
                }

                try fill()
                start = nanosecondsNow()
                for key in keys { cache.removeValue(forKey: key) }
                try cache.flush()
                byKey[size, default: []].append(nanosecondsNow() - start)
                try check(cache, count: untagged, "after removing \(size) keys one by one")
            }
            log("tags: run \(run + 1) of \(runs) done")
        }

        var table = ExtraTable(
            title: "Tag removal (median of \(runs) runs)",
            header: [
                "tagged", "entries", "removeAll(taggedWith:)", "min-max", "per entry", "removeValue each + flush",
                "per entry",
            ],
            rightAligned: [0, 1, 2, 3, 4, 5, 6], rows: [])
        var rows: [ResultRow] = []
        for size in sizes {
            let tagTimes = byTag[size, default: []].map { Double($0) }
            let keyTimes = byKey[size, default: []].map { Double($0) }
            table.rows.append([
                size.formatted(.number.grouping(.automatic)),
                (untagged + size).formatted(.number.grouping(.automatic)),
                formatNanoseconds(tagTimes.median),
                "\(formatNanoseconds(tagTimes.min() ?? 0))-\(formatNanoseconds(tagTimes.max() ?? 0))",
                formatMicroseconds(tagTimes.median / Double(size)),
                formatNanoseconds(keyTimes.median),
                formatMicroseconds(keyTimes.median / Double(size)),
            ])
            for (workload, times) in [
                ("removeAll(taggedWith:)", tagTimes), ("removeValue(forKey:) each, then flush()", keyTimes),
            ] {
                var row = ResultRow(
                    suite: "coherence", system: "LMDBCache", workload: workload, threads: 1,
                    valueBytes: Self.valueBytes, opsPerSecond: Double(size) / (times.median / 1e9),
                    p50Nanoseconds: times.median / Double(size), p99Nanoseconds: (times.max() ?? 0) / Double(size),
                    capacity: size, capacityUnit: "entries",
                    runsOpsPerSecond: times.map { Double(size) / ($0 / 1e9) })
                row.calls = runs
                rows.append(row)
            }
        }
        return Result(
            parameters: [
                (
                    "tag removal",
                    "a Cache<String, [UInt8]> (default configuration, its own directory) holding \(untagged) untagged "
                        + "entries; per run and size, that many entries inserted with one tag and flushed, then timed: "
                        + "removeAll(taggedWith:), or removeValue(forKey:) of each then flush() (after inserting them "
                        + "again); \(runs) runs\(quick ? " (--quick: 100,000 tagged left out)" : "")"
                )
            ],
            notes: [
                "Tag removal: the time of one removeAll(taggedWith:) call (both tiers; the disk tier in transactions of "
                    + "at most 1,024 removals, each committed and synced), median of the runs, and that over the tagged "
                    + "entries. Beside it, removing the same entries one key at a time and flushing them. Each call's "
                    + "count and the cache's total afterwards are checked."
            ],
            table: table, rows: rows)
    }

    private func check(_ cache: Cache<String, [UInt8]>, count: Int, _ when: String) throws {
        guard let disk = cache.disk, disk.totalCount == count else {
            throw TagRemovalFailure("\(cache.disk?.totalCount ?? 0) entries on disk \(when), not \(count)")
        }
    }
}

struct TagRemovalFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = "tags: \(description)" }
}

/// Microseconds with two decimals: `4.21 µs`.
func formatMicroseconds(_ nanoseconds: Double) -> String {
    format(nanoseconds / 1e3, decimals: 2) + " µs"
}
