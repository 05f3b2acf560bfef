import CacheTestSupport
import Foundation
import Testing

/// The synced-snapshot restore of `.periodic` stores (defect 13), against a real writer killed
/// with SIGKILL: the page cache keeps its unsynced commit, as after a kill, or the next open
/// acts as the first after a reboot (another boot id), as after a power loss.
@Suite("Storage: the last synced snapshot of a .periodic store", .serialized)
struct SyncedSnapshotTests {
    /// Kills a `periodic-commit` writer (k0 flushed, k1 committed, unsynced) in a fresh directory,
    /// then runs `check DIR 2` with `environment`; returns its summary line.
    private func killThenCheck(environment: [String: String]) throws -> String {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let writer = try HelperProcess(["periodic-commit", dir.path])
        let line = writer.readLine()
        writer.kill()
        try #require(line == "committed")
        let output = Pipe()
        let checker = try PowerLossRun.start(["check", dir.path, "2"], environment: environment, output: output)
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        checker.waitUntilExit()
        #expect(checker.terminationReason == .exit && checker.terminationStatus == 0)
        let setAside = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.contains("damaged") }
        #expect(setAside.isEmpty)
        return text.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("a kill -9 in the same boot keeps every commit of a .periodic store, synced or not")
    func killInSameBootKeepsUnsyncedCommits() throws {
        let summary = try killThenCheck(environment: [:])
        #expect(summary.hasPrefix("hits 2 misses 0 errors 0 wrong 0"), "\(summary)")
    }

    @Test("the first open after a reboot reopens a .periodic store at exactly its last synced snapshot")
    func firstOpenAfterRebootRestoresLastSyncedSnapshot() throws {
        let summary = try killThenCheck(environment: ["LMDBCACHE_TEST_BOOT_ID": "the-next-boot"])
        // k0 was flushed (synced); k1 only committed: the restored snapshot holds k0 alone.
        #expect(summary.hasPrefix("hits 1 misses 1 errors 0 wrong 0"), "\(summary)")
    }
}
