import CacheTestSupport
import Foundation
import Glibc
import Logging
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Defects found reviewing the change for findings 1 and 3 (the directory opened once, opens that
/// wait outside the registry lock).
@Suite("Security review: the opened directory and waiting opens", .serialized)
struct SecurityReviewTests {
    /// A refused directory closed its descriptor twice: once in the initializer's failure path,
    /// once more in `deinit` (a class whose stored properties are all set runs it when its init
    /// throws). The second close hits a number another thread may have been given meanwhile: its
    /// LMDB data file, or another cache's directory behind `/proc/self/fd/N`.
    @Test("a refused cache directory closes its descriptor once")
    func refusedDirectoryClosedOnce() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        let good = base.url.appendingPathComponent("good")
        let refused = base.url.appendingPathComponent("refused")
        try DiskCache(directory: good).close()
        try StoreDirectoryTests.makeDirectory(refused, mode: 0o777)
        let environment = try FaultInjectionLibrary.abortingOnBadClose()
        for (directory, expected) in [
            (good, "good 0 poisoned 0 missing 1 refused 0"),
            (refused, "good 0 poisoned 0 missing 0 refused 1"),
        ] {
            let helper = try HelperProcess(["open-read-loop", directory.path, "k", "1"], environment: environment)
            let summary = helper.readLine()
            let errors = helper.errorText()
            let status = helper.wait()
            #expect(status == 0, "\(directory.lastPathComponent): \(errors)")
            #expect(summary == expected, "\(directory.lastPathComponent): \(errors)")
        }
    }

    /// An open that found another thread of the process opening the same directory waited for
    /// it without a bound: for as long as that other open's timeout (an hour, say), whatever its
    /// own `openTimeout`.
    @Test("an open waiting for another thread's open of the same store gives up at its own timeout")
    func waitingForAnotherThreadsOpenIsBounded() throws {
        let held = TemporaryDirectory()
        defer { held.remove() }
        try DiskCache(directory: held.url).close()
        let hold = try ExclusiveHold(held.url)
        let (first, waits) = startWaitingOpen(held.url)
        #expect(waits, "the first open waits for the exclusive hold")

        var waitBriefly = DiskCache.Configuration()
        waitBriefly.openTimeout = .milliseconds(50)
        let brief = waitBriefly
        let second = outcome("the second open giving up at its own timeout") {
            try DiskCache(directory: held.url, configuration: brief)
        }
        hold.release()
        let secondResult = try #require(second, "the second open returned while the first still waited")
        #expect {
            try secondResult.get().close()
        } throws: { error in
            guard case .storeInUse = error as? CacheError else { return false }
            return true
        }
        let opened = try #require(first.wait("the first open going on once the hold ended"))
        try opened.get().close()
    }

    /// The path in the "waiting for another process" message reached the log unescaped.
    @Test("the path in the message of an open that waits is escaped")
    func waitingMessageEscapesPath() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        let held = base.url.appendingPathComponent("cache\n\u{1B}[2J\u{202E}")
        try DiskCache(directory: held).close()
        let hold = try ExclusiveHold(held)
        defer { hold.release() }
        var noWait = DiskCache.Configuration()
        noWait.openTimeout = .zero
        let log = CapturedLog()
        #expect(throws: CacheError.self) { try DiskCache(directory: held, configuration: noWait, logger: log.logger) }
        #expect(log.messages(atLeast: .info).contains { $0.contains("waiting for another process") })
        UntrustedTextTests.expectClean(log.everything(), limit: 2_500)
    }

    /// Set-aside files were listed through a `dup` of the directory's descriptor, which shares its
    /// reading position: the first listing left it at the end, and every later one through the
    /// same opened directory found no file.
    @Test("old set-aside files are found on every listing through one opened directory")
    func setAsideListedTwice() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        let opened = try StoreDirectory(path: dir.path, existing: true)
        let log = CapturedLog()
        let earlier = try SetAsideRetentionTests.writeEarlierSetAsides(in: dir)
        let firstKept = "data.mdb.damaged-2000"
        try Data([1]).write(to: dir.url.appendingPathComponent(firstKept))
        #expect(SetAsideFiles.removeOld(in: opened, keeping: firstKept, logger: log.logger) == Array(earlier.prefix(3)))
        let secondKept = "data.mdb.damaged-3000"
        try Data([2]).write(to: dir.url.appendingPathComponent(secondKept))
        try Data([3]).write(to: dir.url.appendingPathComponent("data.mdb.damaged-2500"))
        // Kept: 3000 (just set aside), 2500, 2000; removed: 1003 and 1004, left by the first pass.
        #expect(
            SetAsideFiles.removeOld(in: opened, keeping: secondKept, logger: log.logger) == [earlier[3], earlier[4]])
    }
}

/// A deployment the directory checks must not refuse.
@Suite(
    "Security review: deployments that must still open", .serialized,
    .enabled(if: geteuid() == 0, "running a process as another user needs root"),
    .enabled(if: TwoUsers.helperRunsAsNobody, "the test helper is not executable by nobody (a path mode)"))
struct SecurityReviewDeploymentTests {
    /// The parent was opened `O_RDONLY`, which needs read permission on it, where a path lookup
    /// needs only search permission: a cache under a parent the service may search but not list
    /// (`/srv/app` mode 0711, root's) was refused with "Permission denied", directly or through
    /// a symbolic link (whose target's parent is opened too).
    @Test("a parent the user may search but not list (mode 0711) does not refuse the cache")
    func searchOnlyParent() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        let parent = base.url.appendingPathComponent("app")
        let cache = parent.appendingPathComponent("cache")
        try StoreDirectoryTests.makeDirectory(cache, mode: 0o700)
        #expect(chown(cache.path, TwoUsers.nobody, gid_t(TwoUsers.nobody)) == 0)
        #expect(chmod(parent.path, 0o711) == 0)
        let link = base.url.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: cache.path)
        for directory in [cache, link] {
            let helper = try HelperProcess(["write", directory.path, "k", "3"], user: TwoUsers.nobody)
            let line = helper.readLine()
            let errors = helper.errorText()
            #expect(helper.wait() == 0, "\(directory.lastPathComponent): \(errors)")
            #expect(line == "done 3", "\(directory.lastPathComponent): \(errors)")
        }
    }
}
