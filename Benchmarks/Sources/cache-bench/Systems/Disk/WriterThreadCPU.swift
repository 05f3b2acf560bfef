import Foundation

/// CPU time of LMDBCache's writer threads in this process (threads named `LMDBCache.writer`,
/// which Linux truncates to 15 characters), from each thread's `/proc/self/task/<id>/schedstat`.
enum WriterThreadCPU {
    /// Nanoseconds on CPU of each such thread alive now, by thread id.
    static func byThread() -> [String: UInt64] {
        guard let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task") else { return [:] }
        var times: [String: UInt64] = [:]
        for task in tasks {
            let base = "/proc/self/task/\(task)"
            guard let name = try? String(contentsOfFile: base + "/comm", encoding: .utf8),
                name.hasPrefix("LMDBCache.write"),
                let schedstat = try? String(contentsOfFile: base + "/schedstat", encoding: .utf8),
                let first = schedstat.split(separator: " ").first, let onCPU = UInt64(first)
            else { continue }
            times[task] = onCPU
        }
        return times
    }

    /// The CPU time writer threads spent between two readings: each thread's own difference (a
    /// thread started since counts from zero; one that ended since is not counted).
    static func spent(from before: [String: UInt64], to after: [String: UInt64]) -> UInt64 {
        after.reduce(0) { total, entry in
            let earlier = before[entry.key] ?? 0
            return entry.value >= earlier ? total &+ (entry.value - earlier) : total
        }
    }
}
