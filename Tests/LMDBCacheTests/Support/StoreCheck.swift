import Foundation

@testable import LMDBCache

/// "Verify the store at PATH": everything the reliability tests require of a store after a fault.
enum StoreCheck {
    /// Runs `cache-dump verify` on the store in `directory` as another process (which opens it
    /// read-only, so it sees the store exactly as the fault left it), then opens it here and runs
    /// the library's full check (`DiskStore.verify()`), and compares the totals kept in the store
    /// with a scan of every record. Returns one line per problem; empty when the store is sound.
    static func problems(at directory: URL) throws -> [String] {
        let tool = try HelperProcess(["verify", directory.path, "--quiet"], executable: "cache-dump")
        var toolOutput: [String] = []
        while let line = tool.readLine() { toolOutput.append(line) }
        let status = tool.wait()
        let toolProblems =
            status == 0 ? [] : ["cache-dump verify exited with \(status): \(toolOutput.joined(separator: "; "))"]

        let disk = try DiskCache(directory: directory)
        defer { disk.close() }
        let report = try disk.store.verify()
        var problems = toolProblems + report.indexProblems
        problems += report.damaged.map { "damaged record under key \($0.key.prefix(40)): \($0.reason)" }
        if report.scanned != report.recorded {
            problems.append("recorded totals \(report.recorded) differ from a scan's \(report.scanned)")
        }
        if disk.totalCount != report.scanned.count || disk.totalCost != report.scanned.bytes {
            problems.append(
                "totalCount/totalCost \(disk.totalCount)/\(disk.totalCost) differ from a scan's "
                    + "\(report.scanned.count)/\(report.scanned.bytes)")
        }
        return problems
    }
}

/// Settings the soak (`scripts/soak`) raises through the environment; CI uses the defaults.
enum SoakSettings {
    /// `name` from the environment as a positive integer, else `fallback`.
    static func value(_ name: String, default fallback: Int) -> Int {
        ProcessInfo.processInfo.environment[name].flatMap { Int($0) }.flatMap { $0 > 0 ? $0 : nil } ?? fallback
    }

    /// Kills of the crash test (CI 20).
    static var crashKills: Int { value("LMDBCACHE_CRASH_KILLS", default: 20) }
    /// Operations each process of the multi-process test performs (CI 3,000).
    static var mixedOperations: Int { value("LMDBCACHE_MIXED_OPERATIONS", default: 3_000) }
    /// Seeds of the random-flip corruption test (CI 4).
    static var corruptionSeeds: Int { value("LMDBCACHE_CORRUPTION_SEEDS", default: 4) }
    /// Seeds per workload of the adaptive policy's reference model (CI 1; the soak 3).
    static var referenceSeeds: Int { value("LMDBCACHE_REFERENCE_SEEDS", default: 1) }
}
