import Foundation
import Glibc
import Testing

@testable import LMDBCache

/// Defects a review of the presence lock, compaction and trim follow-ups found, each forced
/// deterministically.
@Suite("Review findings", .serialized)
struct ReviewFindingsTests {
    @Test("compaction refuses while a read-only process has the store open, even without processes.lock")
    func compactionRefusesBesideReadOnlyOpenWithoutPresenceFile() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let writer = try HelperProcess(["write", dir.path, "k", "300"])
        #expect(writer.readLine() == "done 300")
        #expect(writer.wait() == 0)
        // A store copied without its lock files, or cleaned by hand: a read-only open (cache-dump)
        // creates nothing, so it holds no presence lock at all.
        #expect(unlink(dir.path + "/processes.lock") == 0)
        let reader = try HelperProcess(["hold-readonly", dir.path])
        defer { reader.kill() }
        #expect(reader.readLine() == "open")
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        #expect {
            try disk.compact()
        } throws: { error in
            guard case CacheError.storeInUse = error else { return false }
            return true
        }
        #expect(disk.totalCount == 300)
    }

    @Test("compaction refuses while another process has the store open, even after processes.lock was replaced")
    func compactionRefusesAfterPresenceFileReplaced() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let holder = try HelperProcess(["hold", dir.path])
        defer { holder.kill() }
        #expect(holder.readLine() == "open")
        // The holder's lock is on the unlinked inode; this process creates and locks a new one.
        #expect(unlink(dir.path + "/processes.lock") == 0)
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1, 2, 3], forKey: "k")
        #expect {
            try disk.compact()
        } throws: { error in
            guard case CacheError.storeInUse = error else { return false }
            return true
        }
        #expect(try disk.data(forKey: "k") == [1, 2, 3])
    }

    @Test("a damaged store is not set aside while a read-only process has it open, even without processes.lock")
    func noSetAsideBesideReadOnlyOpenWithoutPresenceFile() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let writer = try HelperProcess(["write", dir.path, "k", "3000"])
        #expect(writer.readLine() == "done 3000")
        #expect(writer.wait() == 0)
        #expect(unlink(dir.path + "/processes.lock") == 0)
        let reader = try HelperProcess(["hold-readonly", dir.path])
        defer { reader.kill() }
        #expect(reader.readLine() == "open")
        // Cut the file to its meta pages: the probe on open finds the tree's pages missing.
        #expect(truncate(dir.url.appendingPathComponent("data.mdb").path, 2 * 4_096) == 0)
        #expect {
            _ = try DiskCache(directory: dir.url)
        } throws: { error in
            guard case CacheError.damagedStore(_, let reason) = error else { return false }
            return reason.contains("another process")
        }
        let names = try FileManager.default.contentsOfDirectory(atPath: dir.path)
        #expect(!names.contains { $0.hasPrefix("data.mdb.damaged") }, "\(names)")
    }

    @Test("writes committed during a trim under a free-space limit evict as many bytes as they added, not the store")
    func freeSpaceFollowUpEvictsOnlyWhatWasAdded() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        var unlimited = DiskCache.Configuration()
        unlimited.automaticTrimming = false
        unlimited.clock = time.clock
        let plain = try DiskCache(directory: dir.url, configuration: unlimited)
        defer { plain.close() }
        for index in 0..<1_200 { try plain.setData([1], forKey: "old\(index)") }
        try plain.flush()
        time.advance(by: .seconds(3_600))
        for index in 0..<1_000 { try plain.setData([2], forKey: "recent\(index)") }
        try plain.flush()
        // A limit no volume meets: the volume is always short, by far more than the store holds.
        var limited = DiskCache.Configuration(freeSpaceLimit: 1 << 60)
        limited.automaticTrimming = false
        limited.clock = time.clock
        let disk = try DiskCache(directory: dir.url, configuration: limited)
        defer { disk.close() }
        let store = disk.store
        time.advance(by: .seconds(1))  // the new entries are the most recently used
        // 50 writes commit between the transactions of an age trim of the 1,200 old entries.
        try store.env.writer.sync {
            for index in 0..<50 { try disk.setData([3], forKey: "new\(index)") }
            let cutoff = time.clock.milliseconds - 1_800_000
            try store.trim(DiskStore.TrimPlan(accessedBefore: cutoff), now: time.clock.milliseconds)
        }
        try disk.flush()
        // The README: each batch under the limit is followed by evicting as many bytes as it added.
        #expect(disk.totalCount >= 950, "about 50 recent entries evicted, not the store: \(disk.totalCount)")
        #expect(try disk.data(forKey: "new49") == [3])
        #expect(try disk.store.verify().isClean)
    }

    @Test("an imported entry keeps its access time however many imports queue before the writer runs")
    func importedAccessTimesKeptPastAccessBuffer() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let created: UInt64 = 1_700_000_000_000
        let count = DiskStore.maxBufferedAccesses + 100
        // The writer busy (a long trim, say) while an import runs: every write and access queues.
        try disk.store.env.writer.sync {
            for index in 0..<count {
                try disk.importEntry(
                    [1], forKey: Array("k\(index)".utf8), created: created, accessed: created + 5_000, expires: nil)
            }
        }
        try disk.flush()
        let last = try #require(try disk.storedEntry(forKey: Array("k\(count - 1)".utf8)))
        #expect(last.accessed == created + 5_000)
    }
}
