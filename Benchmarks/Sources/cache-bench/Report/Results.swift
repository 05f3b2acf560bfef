import BenchmarkData
import Foundation

/// Everything a `--json` file holds: `{"machine": {...}, "seed": N, "results": [...]}`.
struct RunReport: Codable, Sendable {
    var machine: Machine
    /// The seed the rounds' orders were drawn from (`--seed`).
    var seed: UInt64
    var results: [ResultRow]
}

/// `value` with a fixed number of decimals.
func format(_ value: Double, decimals: Int) -> String {
    String(format: "%.\(decimals)f", value)
}

/// A plain text table: a header row, a rule, then rows, columns padded to their widest cell
/// (text left-aligned, numbers right-aligned).
struct TextTable {
    var header: [String]
    /// Which columns are right-aligned.
    var rightAligned: Set<Int>
    var rows: [[String]] = []
    /// Indices of rows to print a blank line before.
    var groupStarts: Set<Int> = []

    func render() -> String {
        var widths = header.map(\.count)
        for row in rows {
            for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return rightAligned.contains(column) ? padding + cell : cell + padding
            }
            .joined(separator: "  ")
            .replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
        var lines = [line(header), widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")]
        for (index, row) in rows.enumerated() {
            if groupStarts.contains(index) { lines.append("") }
            lines.append(line(row))
        }
        return lines.joined(separator: "\n")
    }
}

/// Operations per second, short: `1.23 M`, `45.6 k`, `812`.
func formatRate(_ value: Double) -> String {
    if value >= 1e6 { return format(value / 1e6, decimals: 2) + " M" }
    if value >= 1e4 { return format(value / 1e3, decimals: 1) + " k" }
    if value >= 1e3 { return format(value / 1e3, decimals: 2) + " k" }
    return format(value, decimals: 0)
}

/// Nanoseconds, short: `850 ns`, `12.3 µs`, `1.20 ms`.
func formatNanoseconds(_ value: Double) -> String {
    if value >= 1e6 { return format(value / 1e6, decimals: 2) + " ms" }
    if value >= 1e4 { return format(value / 1e3, decimals: 1) + " µs" }
    if value >= 1e3 { return format(value / 1e3, decimals: 2) + " µs" }
    return format(value, decimals: 0) + " ns"
}

/// A ratio as a percentage with two decimals, or empty.
func formatPercent(_ value: Double?) -> String {
    value.map { format($0 * 100, decimals: 2) + "%" } ?? ""
}

/// A suite's results as table cells, shared by the text output and report.md.
struct ResultTable {
    var header: [String]
    var rightAligned: Set<Int>
    var rows: [[String]] = []
    /// Indices of rows that start a new workload.
    var groupStarts: Set<Int> = []

    init(_ report: SuiteReport) {
        switch report.suite {
        case "hitrate":
            header = ["trace", "capacity", "system", "hit ratio", "reference", "vs LMDBCache"]
            rightAligned = [1, 3, 4, 5]
        case "tiered":
            header = [
                "workload", "threads", "system", "ops/s", "min-max", "memory hits", "disk hits", "either tier", "p50",
                "p99",
            ]
            rightAligned = [1, 3, 4, 5, 6, 7, 8, 9]
        case "fleet":
            header = ["workload", "system", "calls", "p50", "p99", "vs Redis only: p50", "p99"]
            rightAligned = [2, 3, 4, 5, 6]
        case "disk":
            header = [
                "workload", "value", "threads", "system", "durable", "ops/s", "min-max", "p50", "p99", "vs LMDBCache",
            ]
            rightAligned = [1, 2, 5, 6, 7, 8, 9]
        default:
            header = ["workload", "value", "threads", "system", "ops/s", "min-max", "p50", "p99", "vs LMDBCache"]
            rightAligned = [1, 2, 4, 5, 6, 7, 8]
        }
        var previousGroup: String?
        for row in report.rows {
            let group = "\(row.workload) \(row.valueBytes) \(row.valueKind ?? "") \(row.threads) \(row.capacity ?? 0)"
            if let previousGroup, previousGroup != group { groupStarts.insert(rows.count) }
            previousGroup = group
            let range =
                "\(formatRate(row.runsOpsPerSecond.min() ?? 0))-\(formatRate(row.runsOpsPerSecond.max() ?? 0))"
            let ratio = formatRatio(row)
            switch report.suite {
            case "hitrate":
                rows.append([
                    row.workload, formatCapacity(row.capacity ?? 0, bytes: row.capacityUnit == "bytes"), row.label,
                    formatPercent(row.hitRatio), formatPercent(row.referenceHitRatio), ratio,
                ])
            case "fleet":
                rows.append([
                    row.workload, row.label, "\(row.calls ?? 0)", formatNanoseconds(row.p50Nanoseconds),
                    formatNanoseconds(row.p99Nanoseconds), formatTimes(row.p50VsRedisOnly),
                    formatTimes(row.p99VsRedisOnly),
                ])
            case "tiered":
                rows.append([
                    row.workload, "\(row.threads)", row.label, formatRate(row.opsPerSecond), range,
                    formatPercent(row.memoryHitRatio), formatPercent(row.diskHitRatio), formatPercent(row.hitRatio),
                    formatNanoseconds(row.p50Nanoseconds), formatNanoseconds(row.p99Nanoseconds),
                ])
            default:
                let durable = report.suite == "disk" ? [row.durable ?? ""] : []
                rows.append(
                    [row.workload, formatValue(row), "\(row.threads)", row.label] + durable + [
                        formatRate(row.opsPerSecond), range, formatNanoseconds(row.p50Nanoseconds),
                        formatNanoseconds(row.p99Nanoseconds), ratio,
                    ])
            }
        }
    }

    /// Aligned plain text.
    var text: String {
        TextTable(header: header, rightAligned: rightAligned, rows: rows, groupStarts: groupStarts).render()
    }

    /// A GitHub-flavoured Markdown table.
    var markdown: String { markdownTable(header: header, rightAligned: rightAligned, rows: rows) }
}

/// A ratio with two decimals and an x (`12.40x`), or empty.
func formatTimes(_ value: Double?) -> String {
    value.map { format($0, decimals: 2) + "x" } ?? ""
}

/// A row's ratio to LMDBCache: `0.84x`, with the per-round range when there is one
/// (`0.84x (0.80-0.88)`), and `within noise` when that range holds 1.
func formatRatio(_ row: ResultRow) -> String {
    guard let ratio = row.ratioToLMDBCache else { return "" }
    var text = format(ratio, decimals: 2) + "x"
    if let low = row.ratioMin, let high = row.ratioMax, !row.isReference {
        text += " (\(format(low, decimals: 2))-\(format(high, decimals: 2)))"
        if row.withinNoise == true { text += " within noise" }
    }
    return text
}

/// A value size: `100 B`, `4 KB`.
func formatValueBytes(_ bytes: Int) -> String {
    bytes >= 1_024 ? "\(bytes / 1_024) KB" : "\(bytes) B"
}

/// A row's value: its size, and its kind where the suite has several (`4 KB random`).
func formatValue(_ row: ResultRow) -> String {
    formatValueBytes(row.valueBytes) + (row.valueKind.map { " \($0)" } ?? "")
}

/// A byte count in binary units, short: `812 B`, `5.3 MiB`, `1.20 GiB`.
func formatBytes(_ value: Int) -> String {
    let bytes = Double(value)
    if bytes >= Double(1 << 30) { return format(bytes / Double(1 << 30), decimals: 2) + " GiB" }
    if bytes >= Double(1 << 20) { return format(bytes / Double(1 << 20), decimals: 1) + " MiB" }
    if bytes >= Double(1 << 10) { return format(bytes / Double(1 << 10), decimals: 1) + " KiB" }
    return "\(value) B"
}

/// A table a suite prints after its main one (the disk suite's storage table).
struct ExtraTable: Sendable {
    var title: String
    var header: [String]
    var rightAligned: Set<Int>
    var rows: [[String]]
    /// Indices of rows the text table puts a blank line before.
    var groupStarts: Set<Int> = []

    var text: String {
        TextTable(header: header, rightAligned: rightAligned, rows: rows, groupStarts: groupStarts).render()
    }

    var markdown: String { markdownTable(header: header, rightAligned: rightAligned, rows: rows) }
}

/// A GitHub-flavoured Markdown table.
func markdownTable(header: [String], rightAligned: Set<Int>, rows: [[String]]) -> String {
    let align = header.indices.map { rightAligned.contains($0) ? "---:" : "---" }
    let lines = [header, align] + rows
    return lines.map {
        "| " + $0.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
    }
    .joined(separator: "\n")
}

/// A capacity as entries (`15,000`) or, for byte-bounded traces, binary bytes (`128 MiB`).
func formatCapacity(_ capacity: Int, bytes: Bool) -> String {
    guard bytes else { return capacity.formatted(.number.grouping(.automatic)) }
    if capacity % (1 << 30) == 0 { return "\(capacity >> 30) GiB" }
    if capacity % (1 << 20) == 0 { return "\(capacity >> 20) MiB" }
    if capacity % (1 << 10) == 0 { return "\(capacity >> 10) KiB" }
    return "\(capacity) B"
}

extension SuiteReport {
    /// The suite's header, table and notes as plain text.
    func render() -> String {
        var lines = ["== suite: \(suite) =="]
        for (key, value) in parameters { lines.append("\(key): \(value)") }
        lines.append("")
        lines.append(ResultTable(self).text)
        for table in extraTables {
            lines += ["", table.title, "", table.text]
        }
        lines.append("")
        lines += notes.map { "- " + $0 }
        return lines.joined(separator: "\n")
    }
}

/// Writes `report` as pretty-printed JSON to `path`, creating its directory if needed.
func writeJSON(_ report: RunReport, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let data = try encoder.encode(report)
    let url = URL(fileURLWithPath: path)
    try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
    try data.write(to: url)
}
