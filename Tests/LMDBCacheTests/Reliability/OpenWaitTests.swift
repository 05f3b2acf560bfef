import CacheTestSupport
import Foundation
import Glibc
import Logging
import Testing

@testable import LMDBCache

/// Finding 3 of the security review: an open that has to wait (another process compacting the
/// store, or holding LMDB's writer lock) held the process-wide registry lock, so opening or
/// closing any other cache in the process waited for it, for ever.
@Suite("Security: an open that waits holds up no other cache", .serialized)
struct OpenWaitTests {
    @Test("while another process has one store to itself, other directories open and close, and that open waits")
    func otherDirectoriesDoNotWait() throws {
        let held = TemporaryDirectory()
        let other = TemporaryDirectory()
        defer {
            held.remove()
            other.remove()
        }
        try DiskCache(directory: held.url).close()
        let hold = try ExclusiveHold(held.url)
        let (blocked, waits) = startWaitingOpen(held.url)
        #expect(waits, "the open of the held store says it waits")

        let others = outcome("another directory's opens and closes") { () throws -> [UInt8]? in
            let disk = try DiskCache(directory: other.url)
            try disk.setData([7], forKey: "k")
            let read = try disk.data(forKey: "k")
            disk.close()
            guard read == [7] else { return nil }
            // A second handle on a store being closed and opened again also goes through.
            return try DiskCache(directory: other.url).data(forKey: "k")
        }
        #expect(try others?.get() == [7], "another directory opened and closed while the held one waited")
        // Not a window of time: the open said it waits for the hold, which has not ended, and it
        // may wait an hour; it cannot have finished, unless it gave up wrongly.
        #expect(blocked.finished == nil, "the held store's open still waits")

        hold.release()
        let opened = try #require(blocked.wait("the open going on once the hold ended"))
        try opened.get().close()
    }

    @Test("an open still waiting for another process's exclusive hold at its timeout throws storeInUse")
    func openTimesOut() throws {
        let held = TemporaryDirectory()
        defer { held.remove() }
        try DiskCache(directory: held.url).close()
        let hold = try ExclusiveHold(held.url)
        defer { hold.release() }
        var waitBriefly = DiskCache.Configuration()
        waitBriefly.openTimeout = .milliseconds(50)
        let configuration = waitBriefly
        let result = try #require(
            outcome("the open giving up at its timeout") {
                try DiskCache(directory: held.url, configuration: configuration)
            })
        #expect {
            try result.get().close()
        } throws: { error in
            guard case .storeInUse(let path, _) = error as? CacheError else { return false }
            return path == held.url.standardizedFileURL.path
        }
    }

    @Test("a process holding LMDB's writer lock (a write stopped half-way) does not hold up opening the store")
    func writerLockDoesNotHoldUpOpen() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            try disk.setData(Array("kept".utf8), forKey: "k")
            disk.close()
        }
        let writer = try HelperProcess(["hold-writer", dir.path])
        defer {
            writer.kill()
            _ = writer.wait()
        }
        try #require(writer.readLine() == "writing")
        var untrimmed = DiskCache.Configuration()
        untrimmed.automaticTrimming = false
        let configuration = untrimmed
        let opened = outcome("the open of a store whose writer lock another process holds") { () throws -> DiskCache in
            let disk = try DiskCache(directory: dir.url, configuration: configuration)
            _ = disk.totalCount
            return disk
        }
        let disk = try #require(try opened?.get(), "the open returned while another process holds the writer lock")
        #expect(disk.totalCount == 1)
        // Writes need the writer lock: they go on once its holder is gone (LMDB's robust mutex).
        writer.kill()
        _ = writer.wait()
        #expect(try disk.data(forKey: "k") == Array("kept".utf8))
        disk.close()
    }
}
