import BenchmarkData
import Foundation

// `--report DIR` also writes DIR/summary.md: a few headline rows of the run, LMDBCache beside the
// alternatives a service owner would pick instead. scripts/bench copies it into the README
// between its summary markers, so the front page's table always comes from the committed report.
// `cache-bench --summarize Benchmarks/Results/results.json` writes it again from a run's JSON.

/// The summary table of a run's rows (a report's main tables, or a results.json's), with a line
/// naming the run it came from.
func summaryMarkdown(_ all: [ResultRow], machine: Machine) -> String {
    var rows: [[String]] = []

    /// The reference row of a workload and the cell listing `peers` beside it, each as its
    /// throughput over LMDBCache's (`RocksDB 2.04×`); nil when the run has no reference row.
    func throughputRow(
        suite: String, workload: String, bytes: Int, kind: String?, threads: Int, title: String,
        peers: [(system: String, variant: String?)]
    ) -> [String]? {
        let same = all.filter {
            $0.suite == suite && $0.workload == workload && $0.valueBytes == bytes && $0.valueKind == kind
                && $0.threads == threads
        }
        guard let reference = same.first(where: \.isReference) else { return nil }
        let beside = peers.compactMap { peer -> String? in
            // Of a peer's rows, the one durable at the same points as LMDBCache's when there is one.
            let candidates = same.filter { $0.system == peer.system && $0.variant == peer.variant }
            guard
                let row = candidates.first(where: { $0.durable == reference.durable }) ?? candidates.first,
                let ratio = row.ratioToLMDBCache
            else { return nil }
            let durable = row.durable.map { $0 == reference.durable ? "" : " (durable \($0))" } ?? ""
            return "\(row.label) \(format(ratio, decimals: 2))×\(durable)"
        }
        return [suite, title, "\(formatRate(reference.opsPerSecond)) ops/s", beside.joined(separator: ", ")]
    }

    if let threads = all.filter({ $0.suite == "memory" && $0.workload == "get zipf" }).map(\.threads).max(),
        let row = throughputRow(
            suite: "memory", workload: "get zipf", bytes: 100, kind: nil, threads: threads,
            title: "get, Zipf keys, 100 B, \(threads) threads", peers: [("NSCache", nil)])
    {
        rows.append(row)
    }
    // The embedded store a service owner would pick instead (synced per batch, as LMDBCache, and
    // at the end), raw LMDB (the limit) and LMDBCache's own memory tier in front (RocksDB's
    // block-cache budget); SQLite and the others are in the report.
    let diskPeers: [(system: String, variant: String?)] = [
        ("RocksDB", "per batch"), ("RocksDB", nil), ("LMDB-C", "per batch"), ("LMDBCache", "tiered"),
    ]
    for (workload, title) in [
        ("get", "get 4 KB JSON"), ("set", "set 4 KB JSON"), ("get cold", "get 4 KB JSON, cold page cache"),
        ("YCSB-B 95/5", "YCSB-B 95/5 4 KB JSON"),
    ] {
        if let row = throughputRow(
            suite: "disk", workload: workload, bytes: 4_096, kind: "json", threads: 1, title: title, peers: diskPeers)
        {
            rows.append(row)
        }
    }
    // Hit rate: each trace at its middle capacity, LMDBCache's ratio beside the others'.
    let hitRows = all.filter { $0.suite == "hitrate" && $0.hitRatio != nil }
    var traces: [String] = []
    for row in hitRows where !traces.contains(row.workload) { traces.append(row.workload) }
    for trace in traces {
        let capacities = Set(hitRows.filter { $0.workload == trace }.compactMap(\.capacity)).sorted()
        guard !capacities.isEmpty else { continue }
        let capacity = capacities[capacities.count / 2]
        let same = hitRows.filter { $0.workload == trace && $0.capacity == capacity }
        guard let reference = same.first(where: \.isReference) else { continue }
        // A published figure the harness's own replay of the same policy equals (as printed) is
        // said once.
        let beside = same.filter { row in
            row.system != "LMDBCache"
                && !(row.label.hasSuffix(" (published)")
                    && same.contains {
                        $0.label == String(row.label.dropLast(" (published)".count))
                            && formatPercent($0.hitRatio) == formatPercent(row.hitRatio)
                    })
        }.map { "\($0.label) \(formatPercent($0.hitRatio))" }
        let unit = reference.capacityUnit == "bytes"
        rows.append([
            "hitrate", "\(trace) at \(formatCapacity(capacity, bytes: unit))",
            "\(formatPercent(reference.hitRatio)) hits",
            beside.joined(separator: ", "),
        ])
    }
    // Several machines: what a get-or-load of a present key costs, by the tier that served it,
    // beside Redis as the only cache.
    for row in all
    where row.suite == "fleet" && row.system == "LMDBCache" && row.workload == "get-or-load, present key"
        && row.variant != "served by disk"
    {
        let versus = row.p50VsRedisOnly.map { "Redis alone: \(format($0, decimals: 2))× LMDBCache's p50" }
        rows.append([
            "fleet", "get-or-load \(row.variant ?? "")", "p50 \(formatNanoseconds(row.p50Nanoseconds))", versus ?? "",
        ])
    }
    let table = markdownTable(
        header: ["suite", "workload", "LMDBCache", "beside it (throughput over LMDBCache's; hit ratios)"],
        rightAligned: [2], rows: rows)
    let machineText = "\(machine.cores) cores, \(machine.cpuModel), \(machine.swift), \(machine.build) build"
    return "From the `./scripts/bench` run of \(machine.date.prefix(10)) (\(machineText)):\n\n" + table + "\n"
}
