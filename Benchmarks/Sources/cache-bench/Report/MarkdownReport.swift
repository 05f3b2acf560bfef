import BenchmarkData
import Foundation

// `--report DIR`: DIR/report.md with every suite's parameters, table and notes, one SVG bar
// chart per suite beside it (DIR/<suite>.svg), linked from the report, and DIR/summary.md
// (Summary.swift).

/// Writes `report.md`, `summary.md` and the charts of `reports` into `directory` (created if missing).
func writeReport(
    _ reports: [SuiteReport], machine: Machine, seed: UInt64, seconds: Double, to directory: String
) throws {
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    var lines = [
        "# cache-bench report",
        "",
        "- date: \(machine.date)\(machine.quick ? " (`--quick`: small sizes, not for comparison)" : "")",
        "- machine: \(machine.description)",
        "- seed: \(seed) (`--seed \(seed)` repeats the orders of systems)",
        "- total time: \(format(seconds, decimals: 0)) s",
        "",
        "Every system runs the same pre-generated workload in the same process and run, with the repeats",
        "interleaved (each round in an order drawn from the seed); ratios are to LMDBCache on the same",
        "workload, taken round by round (above 1: faster than LMDBCache), with their min-max; \"within",
        "noise\" marks a row whose per-round ratios fall on both sides of 1.",
        "",
    ]
    for report in reports {
        let chartFile = "\(report.suite).svg"
        try Data(chart(for: report).svg.utf8).write(to: URL(fileURLWithPath: "\(directory)/\(chartFile)"))
        lines.append("## \(report.suite)")
        lines.append("")
        lines.append("![\(report.suite) chart](\(chartFile))")
        lines.append("")
        for (key, value) in report.parameters { lines.append("- \(key): \(value)") }
        lines.append("")
        lines.append(ResultTable(report).markdown)
        lines.append("")
        for table in report.extraTables {
            lines += ["**\(table.title)**", "", table.markdown, ""]
        }
        lines += report.notes.map { "- " + $0 }
        lines.append("")
    }
    try Data(lines.joined(separator: "\n").utf8).write(to: URL(fileURLWithPath: "\(directory)/report.md"))
    try Data(summaryMarkdown(reports.flatMap(\.rows), machine: machine).utf8).write(
        to: URL(fileURLWithPath: "\(directory)/summary.md"))
}

/// The suite's chart: throughput per workload for memory and disk, hit ratios per tier for
/// tiered, hit ratio per capacity for hitrate.
func chart(for report: SuiteReport) -> BarChart {
    var groups: [BarChart.Group] = []
    func group(_ label: String) -> Int {
        if let index = groups.firstIndex(where: { $0.label == label }) { return index }
        groups.append(.init(label: label, bars: []))
        return groups.count - 1
    }
    switch report.suite {
    case "hitrate":
        for row in report.rows {
            let capacity = formatCapacity(row.capacity ?? 0, bytes: row.capacityUnit == "bytes")
            let index = group("\(row.workload) @ \(capacity)")
            groups[index].bars.append(
                .init(series: row.label, value: row.hitRatio ?? 0, text: formatPercent(row.hitRatio)))
            if let reference = row.referenceHitRatio, row.system == "LRU" {
                groups[index].bars.append(
                    .init(series: "published LRU", value: reference, text: formatPercent(reference)))
            }
        }
        return BarChart(
            title: "Hit ratio by cache size", subtitle: "replayed traces; longer is better", groups: groups,
            scale: .shared)
    case "tiered":
        for row in report.rows {
            let index = group("\(row.label), \(row.threads) thread\(row.threads == 1 ? "" : "s")")
            let bars: [(String, Double?)] = [
                ("memory tier hits", row.memoryHitRatio), ("disk tier hits (of memory misses)", row.diskHitRatio),
                ("either tier", row.hitRatio),
            ]
            for (series, value) in bars {
                groups[index].bars.append(.init(series: series, value: value ?? 0, text: formatPercent(value)))
            }
        }
        let throughput = report.rows.map { "\($0.threads)t \(formatRate($0.opsPerSecond)) ops/s" }
            .joined(separator: ", ")
        return BarChart(
            title: "Tiered: hit ratio per tier", subtitle: "throughput: \(throughput)", groups: groups, scale: .shared)
    case "fleet":
        for row in report.rows {
            let p99 = formatNanoseconds(row.p99Nanoseconds)
            groups[group(row.workload)].bars.append(
                .init(
                    series: row.label, value: row.p50Nanoseconds,
                    text: "p50 \(formatNanoseconds(row.p50Nanoseconds)), p99 \(p99)"))
        }
        return BarChart(
            title: "fleet: get-or-load latency (p50)",
            subtitle: "three nodes and Redis on loopback; shorter is faster; each workload scaled to its slowest",
            groups: groups, scale: .perGroup)
    default:
        for row in report.rows {
            let value = formatValue(row)
            let label =
                report.suite == "memory" || row.threads > 1
                ? "\(row.workload), \(row.threads)t" : "\(row.workload), \(value)"
            let ratio = row.ratioToLMDBCache.map { " (\(format($0, decimals: 2))x)" } ?? ""
            groups[group(label)].bars.append(
                .init(series: row.label, value: row.opsPerSecond, text: "\(formatRate(row.opsPerSecond)) ops/s\(ratio)")
            )
        }
        return BarChart(
            title: "\(report.suite): throughput",
            subtitle: "longer is faster; each workload scaled to its fastest system",
            groups: groups, scale: .perGroup)
    }
}
