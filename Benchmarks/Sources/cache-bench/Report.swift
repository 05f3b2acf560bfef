import Foundation

/// The machine a run was made on, printed above the tables and stored in the JSON.
struct Machine: Codable, Sendable {
    var cores: Int
    var architecture: String
    var cpuModel: String
    var operatingSystem: String

    static func current() -> Machine {
        var names = utsname()
        uname(&names)
        let architecture = withUnsafeBytes(of: &names.machine) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        return Machine(
            cores: ProcessInfo.processInfo.activeProcessorCount,
            architecture: architecture,
            cpuModel: field("model name", in: "/proc/cpuinfo") ?? "unknown",
            operatingSystem: field("PRETTY_NAME", in: "/etc/os-release", separator: "=")?
                .trimmingCharacters(in: CharacterSet(charactersIn: "\""))
                ?? ProcessInfo.processInfo.operatingSystemVersionString
        )
    }

    /// The value of the first `name<separator>value` line of a text file.
    private static func field(_ name: String, in path: String, separator: Character = ":") -> String? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: separator, maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == name {
                return parts[1].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    var description: String {
        "\(cores) cores, \(architecture), \(cpuModel), \(operatingSystem)"
    }
}

/// Everything a `--json` file holds.
struct RunReport: Codable, Sendable {
    var tool = "cache-bench"
    var date: String
    var quick: Bool
    var machine: Machine
    var suites: [SuiteReport]
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

extension SuiteReport {
    /// The suite's header, table and notes as plain text.
    func render() -> String {
        var table = TextTable(
            header: ["op", "keys", "threads", "system", "Mops/s", "min-max", "p50 ns", "p99 ns", "vs LMDBCache"],
            rightAligned: [2, 4, 5, 6, 7, 8])
        var previousCell: String?
        for row in rows {
            let cell = "\(row.operation) \(row.distribution) \(row.threads)"
            if let previousCell, previousCell != cell { table.groupStarts.insert(table.rows.count) }
            previousCell = cell
            let low = row.runsMops.min() ?? 0
            let high = row.runsMops.max() ?? 0
            table.rows.append([
                row.operation, row.distribution, "\(row.threads)", row.system,
                format(row.medianMops, decimals: 2),
                "\(format(low, decimals: 2))-\(format(high, decimals: 2))",
                format(row.p50Nanos, decimals: 0), format(row.p99Nanos, decimals: 0),
                row.ratioToReference.map { format($0, decimals: 2) + "x" } ?? "",
            ])
        }
        var lines = ["== suite: \(suite) =="]
        for key in parameters.keys.sorted() { lines.append("\(key): \(parameters[key]!)") }
        lines.append("")
        lines.append(table.render())
        lines.append("")
        lines += notes.map { "- " + $0 }
        return lines.joined(separator: "\n")
    }
}

/// Writes `report` as pretty-printed JSON to `path`.
func writeJSON(_ report: RunReport, to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    let data = try encoder.encode(report)
    try data.write(to: URL(fileURLWithPath: path))
}
