import Foundation

/// The machine's CPU time counters from `/proc/stat` (its `cpu` line, in clock ticks): the share
/// of time a hypervisor gave the virtual CPUs to someone else ("steal") shows how much a
/// neighbour may have disturbed a run.
public struct CPUTimes: Sendable {
    /// All ticks: user, nice, system, idle, iowait, irq, softirq, steal.
    public var total: UInt64
    public var steal: UInt64

    /// Now, or nil where `/proc/stat` cannot be read or parsed (its text is not trusted).
    public static func now() -> CPUTimes? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
            let line = text.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") })
        else { return nil }
        let fields = line.split(separator: " ").dropFirst().prefix(8).compactMap { UInt64($0) }
        guard fields.count == 8 else { return nil }
        var total: UInt64 = 0
        for field in fields {
            let (sum, overflow) = total.addingReportingOverflow(field)
            guard !overflow else { return nil }
            total = sum
        }
        return CPUTimes(total: total, steal: fields[7])
    }

    /// The share of CPU time stolen between `earlier` and this reading, 0–1; nil when the
    /// counters did not move forward.
    public func stealShare(since earlier: CPUTimes) -> Double? {
        guard total > earlier.total, steal >= earlier.steal else { return nil }
        return Double(steal - earlier.steal) / Double(total - earlier.total)
    }

    /// `0.4% of CPU time stolen`, or `unknown` without readings.
    public static func describeSteal(from earlier: CPUTimes?, to later: CPUTimes?) -> String {
        guard let earlier, let later, let share = later.stealShare(since: earlier) else { return "unknown" }
        return String(format: "%.1f%%", share * 100) + " of CPU time stolen (/proc/stat)"
    }
}
