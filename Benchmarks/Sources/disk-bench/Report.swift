import BenchmarkData
import Foundation
import Glibc

/// One line of the results: a workload run by one system.
struct Measurement: Codable, Sendable {
    /// What was run, e.g. `read 4 KB json ×100k`.
    var workload: String
    /// `DiskCache` or the raw C baseline.
    var system: String
    /// Operations in one round.
    var operations: Int
    /// Nanoseconds per operation of every round, in the order run.
    var roundNanosecondsPerOperation: [Double]
    /// The median of the rounds' nanoseconds per operation.
    var nanosecondsPerOperation: Double
    /// Operations per second at the median round.
    var operationsPerSecond: Double
    /// DiskCache throughput ÷ the baseline's, on DiskCache lines that have a baseline.
    var ratio: Double?

    init(workload: String, system: String, operations: Int, rounds: [Double]) {
        self.workload = workload
        self.system = system
        self.operations = operations
        roundNanosecondsPerOperation = rounds
        nanosecondsPerOperation = median(rounds)
        operationsPerSecond = 1e9 / nanosecondsPerOperation
    }
}

/// The middle value (the mean of the two middle ones for an even count); NaN when empty.
func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    guard !sorted.isEmpty else { return .nan }
    let middle = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
}

/// The machine and build the numbers were measured on.
struct MachineInfo: Codable, Sendable {
    var processors: Int
    var cpuModel: String
    var memoryTotal: String
    var kernel: String
    var swiftCompiler: String
    var buildConfiguration: String
    var benchDirectory: String
    var fileSystem: String

    /// This machine (``Machine``), with `directory`, where the stores are created.
    static func current(directory: String) -> MachineInfo {
        let machine = Machine.current(quick: false)
        return MachineInfo(
            processors: machine.cores,
            cpuModel: machine.cpuModel,
            memoryTotal: machine.memory,
            kernel: "\(machine.kernel) \(machine.architecture)",
            swiftCompiler: machine.swift,
            buildConfiguration: machine.build,
            benchDirectory: directory,
            fileSystem: fileSystemName(directory))
    }

    var lines: [String] {
        [
            "nproc:     \(processors)",
            "cpu:       \(cpuModel)",
            "memory:    \(memoryTotal)",
            "kernel:    \(kernel)",
            "swift:     \(swiftCompiler), \(buildConfiguration) build",
            "directory: \(benchDirectory) (\(fileSystem))",
        ]
    }
}

/// Everything one run measured, as written by `--json`.
struct Report: Codable, Sendable {
    var machine: MachineInfo
    var quick: Bool
    var results: [Measurement]
    /// Extra facts, e.g. the scale run's totals and file size.
    var notes: [String]

    /// The results as an aligned text table: workload, system, ops/s, ns/op (median), ratio.
    var table: String {
        let header = ["workload", "system", "ops/s", "ns/op", "ratio"]
        let rows = results.map { result in
            [
                result.workload, result.system, Self.grouped(result.operationsPerSecond),
                Self.nanoseconds(result.nanosecondsPerOperation),
                result.ratio.map { String(format: "%.2f", $0) } ?? "",
            ]
        }
        let widths = header.indices.map { column in
            ([header] + rows).map { $0[column].count }.max() ?? 0
        }
        // Text columns align left, numbers right.
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { column, cell in
                let padding = String(repeating: " ", count: widths[column] - cell.count)
                return column < 2 ? cell + padding : padding + cell
            }.joined(separator: "  ")
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(header), rule] + rows.map(line)).joined(separator: "\n")
    }

    func writeJSON(to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(self).write(to: URL(fileURLWithPath: path))
    }

    /// `1234567.8` as `1,234,568`.
    static func grouped(_ value: Double) -> String {
        guard value.isFinite else { return "-" }
        var digits = String(Int(value.rounded()))
        var groups: [Substring] = []
        while digits.count > 3 {
            groups.insert(Substring(digits.suffix(3)), at: 0)
            digits.removeLast(3)
        }
        groups.insert(Substring(digits), at: 0)
        return groups.joined(separator: ",")
    }

    private static func nanoseconds(_ value: Double) -> String {
        guard value.isFinite else { return "-" }
        return value < 100 ? String(format: "%.1f", value) : grouped(value)
    }
}

/// Bytes in binary units, e.g. `412.3 MiB`.
func formatBytes(_ bytes: Int) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"]
    var value = Double(bytes)
    var unit = 0
    while value >= 1_024 && unit < units.count - 1 {
        value /= 1_024
        unit += 1
    }
    return unit == 0 ? "\(bytes) B" : "\(String(format: "%.1f", value)) \(units[unit])"
}
