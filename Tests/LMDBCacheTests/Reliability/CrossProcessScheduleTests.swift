import Foundation
import Glibc
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Operations that swap or set aside the store's file, against opens, reads and writes from other
/// processes, with the dangerous interleavings forced rather than hoped for.
@Suite("Cross-process schedules", .serialized)
struct CrossProcessScheduleTests {
    @Test("a process that opens the store while compaction swaps its file waits for it, and nothing is lost")
    func openDuringCompactionWaits() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        // Eleven transactions, as in the reproduction: LMDB's saved transaction id then matters.
        for batch in 0..<11 {
            for index in 0..<100 {
                try disk.setData(
                    KeyedValue.make(key: "k\(batch * 100 + index)", seed: 1), forKey: "k\(batch * 100 + index)")
            }
            try disk.flush()
        }
        let store = disk.store
        var helper: HelperProcess?
        try store.env.writer.sync {
            store.drain()
            try store.env.sync()
            let compacted: Void? = try store.presence.alone {
                // The other process starts now and must get no further than the presence lock
                // before the copy is in place: force the interleaving by waiting until it waits.
                helper = try HelperProcess(["write", dir.path, "other-", "50"])
                try waitUntilWaiting(try #require(helper).processIdentifier, onLockIn: dir.path)
                try store.env.compactInPlace()
            }
            #expect(compacted != nil, "no other process had the store open")
        }
        #expect(helper?.readLine() == "done 50")
        #expect(helper?.wait() == 0)
        disk.close()

        let reopened = try DiskCache(directory: dir.url)
        defer { reopened.close() }
        #expect(reopened.totalCount == 1_150, "every entry of both processes")
        #expect(try reopened.store.verify().isClean)
        for index in stride(from: 0, to: 1_100, by: 37) {
            #expect(try reopened.data(forKey: "k\(index)") == KeyedValue.make(key: "k\(index)", seed: 1))
        }
        #expect(try reopened.data(forKey: "other-49") != nil)
    }

    @Test(
        "a damaged store is not set aside while another process has it open, read-only without processes.lock too",
        arguments: ["hold", "hold-readonly"])
    func noSetAsideUnderAnotherProcess(holderMode: String) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let writer = try HelperProcess(["write", dir.path, "k", "3000"])
        #expect(writer.readLine() == "done 3000")
        #expect(writer.wait() == 0)
        // A read-only open takes no presence lock on a store without the file (copied without
        // it, say): LMDB's own lock must still keep the file in place.
        if holderMode == "hold-readonly" { #expect(unlink(dir.path + "/processes.lock") == 0) }
        let holder = try HelperProcess([holderMode, dir.path])
        defer { holder.kill() }
        #expect(holder.readLine() == "open")
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

    @Test("a closed handle that is still referenced does not count as a process on the store")
    func closedHandleIsNotPresent() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let first = try DiskCache(directory: dir.url)
        try first.setData([1], forKey: "k")
        first.close()
        let other = try HelperProcess(["closed", dir.path])
        defer { other.kill() }
        #expect(other.readLine() == "closed")
        let second = try DiskCache(directory: dir.url)
        defer { second.close() }
        try second.compact()
        #expect(try second.repair().removedRecords == 0)
        #expect(try second.data(forKey: "k") == [1])
        withExtendedLifetime(first) {}
    }

    @Test("reads running while compaction swaps the file in never fail and never see a wrong value")
    func readsDuringCompaction() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        for index in 0..<500 { try disk.setData(KeyedValue.make(key: "k\(index)", seed: 2), forKey: "k\(index)") }
        try disk.flush()
        let stop = LockedFlag()
        let failures = Locked<[String]>([])
        let done = DispatchSemaphore(value: 0)
        for reader in 0..<3 {
            Thread.detachNewThread {
                var index = reader
                while !stop.value {
                    let key = "k\(index % 500)"
                    do {
                        if try disk.data(forKey: key) != KeyedValue.make(key: key, seed: 2) {
                            failures.withLock { $0.append("wrong value for \(key)") }
                        }
                    } catch {
                        failures.withLock { $0.append("\(key): \(error)") }
                    }
                    index += 3
                }
                done.signal()
            }
        }
        for _ in 0..<30 { try disk.compact() }
        _ = stop.set()
        for _ in 0..<3 { done.wait() }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 }.prefix(5))")
        #expect(try disk.store.verify().isClean)
    }

    @Test("a reader slot left by a process killed mid-read is cleared by the next trim pass")
    func trimPassClearsStaleReaders() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let filler = try HelperProcess(["write", dir.path, "k", "5000"])
        #expect(filler.readLine() == "done 5000")
        #expect(filler.wait() == 0)
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let reader = try HelperProcess(["pin", dir.path])
        #expect(reader.readLine() == "pinned")
        let pid = reader.processIdentifier
        #expect(try disk.readerSlots().contains { $0.processID == pid && $0.transaction != nil })
        reader.kill()
        _ = reader.wait()
        disk.trimPass()
        #expect(try !disk.readerSlots().contains { $0.processID == pid }, "the dead reader's slot is gone")
    }

    @Test("a reader slot left by a process killed mid-read is cleared before the map grows")
    func growthClearsStaleReaders() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let filler = try HelperProcess(["write", dir.path, "k", "5000"])
        #expect(filler.readLine() == "done 5000")
        #expect(filler.wait() == 0)
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        configuration.compressionThreshold = nil
        let disk = try DiskCache(directory: dir.url, configuration: configuration)
        defer { disk.close() }
        let reader = try HelperProcess(["pin", dir.path])
        #expect(reader.readLine() == "pinned")
        let pid = reader.processIdentifier
        reader.kill()
        _ = reader.wait()
        let mapBefore = disk.store.env.mapSize
        var written = 0
        // Write until the map has grown at least once.
        while disk.store.env.mapSize == mapBefore {
            try disk.setData(
                sampleBytes(count: 4_000, compressible: false, seed: UInt64(written)), forKey: "big\(written)")
            written += 1
            if written % 500 == 0 { try disk.flush() }
            try #require(written < 200_000, "the map never grew")
        }
        #expect(try !disk.readerSlots().contains { $0.processID == pid }, "the dead reader's slot is gone")
    }
}

/// Waits until process `pid` has `directory`'s `processes.lock` open: it has reached the presence
/// lock, which it cannot take while the caller holds it exclusively, so it waits there (an open
/// polls that lock rather than blocking in `fcntl`, so `/proc/locks` shows no waiter). Polls;
/// records a hang after ``hangBound``.
func waitUntilWaiting(_ pid: Int32, onLockIn directory: String) throws {
    var info = stat()
    guard stat(directory + "/processes.lock", &info) == 0 else {
        throw CacheError.directoryUnavailable(path: directory, reason: "no processes.lock")
    }
    let deadline = ContinuousClock.now + hangBound
    while ContinuousClock.now < deadline {
        let descriptors = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        for name in descriptors {
            var target = stat()
            if stat("/proc/\(pid)/fd/\(name)", &target) == 0, target.st_ino == info.st_ino, target.st_dev == info.st_dev
            {
                return
            }
        }
        usleep(1_000)
    }
    recordHang("process \(pid) opening processes.lock", sourceLocation: #_sourceLocation)
}
