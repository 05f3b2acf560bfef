import CacheTestSupport
import Foundation
import Glibc
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Finding 1 of the security review: the directory is opened once and checked through its
/// descriptor, and LMDB and the library's own files are reached only through it.
@Suite("Security: the cache directory is opened once and checked")
struct StoreDirectoryTests {
    static func expectRefused(_ directory: URL, mentioning fragment: String) {
        #expect {
            _ = try DiskCache(directory: directory)
        } throws: { error in
            guard case .directoryUnavailable(_, let reason) = error as? CacheError else { return false }
            return reason.contains(fragment)
        }
    }

    static func makeDirectory(_ url: URL, mode: mode_t) throws {
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        #expect(chmod(url.path, mode) == 0)
    }

    @Test("a parent that other users may write is refused, unless it is sticky")
    func parentWritableByOthers() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try Self.makeDirectory(base.url, mode: 0o777)
        let cache = base.url.appendingPathComponent("cache")
        Self.expectRefused(cache, mentioning: "other users may write its parent")
        #expect(!FileManager.default.fileExists(atPath: cache.appendingPathComponent("data.mdb").path))
        #expect(chmod(base.path, 0o1777) == 0)
        try DiskCache(directory: cache).close()
        #expect(chmod(base.path, 0o775) == 0)
        Self.expectRefused(cache, mentioning: "other users may write its parent")
    }

    @Test("a cache directory that other users may write is refused")
    func directoryWritableByOthers() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try Self.makeDirectory(dir.url, mode: 0o770)
        Self.expectRefused(dir.url, mentioning: "other users may write it")
        #expect(chmod(dir.path, 0o1777) == 0)
        Self.expectRefused(dir.url, mentioning: "other users may write it")
    }

    @Test("a store file with a second name (a hard link) is refused, and the other name is left alone")
    func hardLinkedStoreFile() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        let cache = base.url.appendingPathComponent("cache")
        try DiskCache(directory: cache).close()
        let other = base.url.appendingPathComponent("other-name")
        #expect(link(cache.appendingPathComponent("lock.mdb").path, other.path) == 0)
        let before = try Data(contentsOf: other)
        Self.expectRefused(cache, mentioning: "lock.mdb has 2 links")
        #expect(try Data(contentsOf: other) == before)
    }

    @Test("the data file LMDB opens is closed on exec: a child process inherits no descriptor of the store")
    func storeDescriptorsClosedOnExec() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try DiskCache(directory: dir.url)
        defer { disk.close() }
        try disk.setData([1], forKey: "k")
        try disk.flush()
        let real = URL(fileURLWithPath: dir.path).resolvingSymlinksInPath().path
        var found: [String: Bool] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            guard let descriptor = Int32(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(name)"),
                target.hasPrefix(real + "/") || target == real
            else { continue }
            let flags = fcntl(descriptor, F_GETFD)
            found[target, default: true] = found[target, default: true] && flags >= 0 && flags & FD_CLOEXEC != 0
        }
        #expect(found[real + "/data.mdb"] != nil, "the data file is open")
        for (target, closedOnExec) in found {
            #expect(closedOnExec, "\(target) is inherited by child processes")
        }
    }

    @Test("directories the cache creates are owner-only even under umask 000")
    func createdOwnerOnlyUnderOpenUmask() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try Self.makeDirectory(base.url, mode: 0o755)
        let cache = base.url.appendingPathComponent("a/b/cache")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = [
            "-c", "umask 000; exec \"$0\" write \"$1\" k 3", HelperProcess.executable("cache-test-helper").path,
            cache.path,
        ]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        for path in ["a", "a/b", "a/b/cache"] {
            let mode = try #require(
                try FileManager.default.attributesOfItem(atPath: base.url.appendingPathComponent(path).path)[
                    .posixPermissions] as? Int)
            #expect(mode == 0o700, "\(path) has mode \(String(mode, radix: 8))")
        }
    }
}

/// The review's attacks need a second user: root runs the victim as `nobody` (setpriv) and plays
/// the attacker itself.
@Suite(
    "Security: a local attacker under another uid", .serialized,
    .enabled(if: geteuid() == 0, "running a process as another user needs root"),
    .enabled(if: TwoUsers.helperRunsAsNobody, "the test helper is not executable by nobody (a path mode)"))
struct TwoUserAttackTests {
    @Test("a symbolic link planted as the cache directory by another user is refused; the user's own is followed")
    func foreignSymlinkAsDirectory() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        let real = base.url.appendingPathComponent("real")
        try DiskCache(directory: real).close()
        let link = base.url.appendingPathComponent("link")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: real.path)
        #expect(lchown(link.path, TwoUsers.nobody, gid_t(TwoUsers.nobody)) == 0)
        StoreDirectoryTests.expectRefused(link, mentioning: "symbolic link that belongs to uid \(TwoUsers.nobody)")
        #expect(lchown(link.path, 0, 0) == 0)
        let viaLink = try DiskCache(directory: link)
        try viaLink.setData([1], forKey: "k")
        viaLink.close()
        let direct = try DiskCache(directory: real)
        #expect(try direct.data(forKey: "k") == [1])
        direct.close()
    }

    @Test("a parent directory that belongs to another user is refused")
    func foreignParent() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        #expect(chown(base.path, TwoUsers.nobody, gid_t(TwoUsers.nobody)) == 0)
        StoreDirectoryTests.expectRefused(base.url.appendingPathComponent("cache"), mentioning: "its parent")
    }

    /// The review's race: the attacker exchanges the victim's cache directory with its own in a
    /// loop (`renameat2(RENAME_EXCHANGE)`), while the victim opens, reads and closes the cache.
    /// The attacker's directory holds a store with a poisoned value, files the victim may write,
    /// and `lock.mdb` as a symbolic link to a file of the victim's. Before the fix the check and
    /// the open looked the path up separately: the victim read the poisoned value and LMDB wrote
    /// its lock header into the file behind the link.
    @Test("the cache directory swapped with an attacker's in a loop: no poisoned value, the linked file untouched")
    func directorySwapRace() throws {
        let base = TemporaryDirectory()
        defer { base.remove() }
        try StoreDirectoryTests.makeDirectory(base.url, mode: 0o755)
        let cache = base.url.appendingPathComponent("cache")
        let evil = base.url.appendingPathComponent("evil")
        let sentinel = base.url.appendingPathComponent("sentinel")
        // The victim's store, then handed to the victim.
        do {
            let disk = try DiskCache(directory: cache)
            try disk.setData(Array("good".utf8), forKey: "k")
            disk.close()
        }
        // The attacker's store (root's), its files open to the victim.
        do {
            let disk = try DiskCache(directory: evil)
            try disk.setData(Array("poisoned".utf8), forKey: "k")
            disk.close()
        }
        let sentinelText = Data("the victim's own file\n".utf8)
        try sentinelText.write(to: sentinel)
        for path in [cache.path, sentinel.path] + TwoUsers.files(in: cache) {
            #expect(chown(path, TwoUsers.nobody, gid_t(TwoUsers.nobody)) == 0)
        }
        #expect(chmod(evil.path, 0o777) == 0)
        for path in TwoUsers.files(in: evil) { #expect(chmod(path, 0o666) == 0) }
        #expect(unlink(evil.appendingPathComponent("lock.mdb").path) == 0)
        #expect(symlink(sentinel.path, evil.appendingPathComponent("lock.mdb").path) == 0)

        let opens = Int(ProcessInfo.processInfo.environment["LMDBCACHE_SWAP_OPENS"] ?? "") ?? 2_000
        let victim = try HelperProcess(["open-read-loop", cache.path, "k", "\(opens)"], user: TwoUsers.nobody)
        let stop = Locked(false)
        let swaps = Locked(0)
        let attacker = PendingOutcome<Int>()
        Thread.detachNewThread {
            while !stop.withLock({ $0 }) {
                if TwoUsers.exchange(cache.path, evil.path) { swaps.withLock { $0 += 1 } }
                // Paced, so the victim meets each directory for a while: some opens pass the
                // check on its own directory and race the swap after it.
                usleep(UInt32.random(in: 0...400))
            }
            attacker.finish(.success(0))
        }
        let summary = victim.readLine()
        let errors = victim.errorText()
        let status = victim.wait()
        stop.withLock { $0 = true }
        _ = attacker.wait("the attacker thread stopping")
        // Put the victim's directory back under its name.
        var info = stat()
        if stat(cache.path, &info) == 0, info.st_uid != TwoUsers.nobody { _ = TwoUsers.exchange(cache.path, evil.path) }

        #expect(status == 0, "victim: \(errors)")
        let counts = TwoUsers.counts(summary ?? "")
        #expect(counts["poisoned"] == 0, "victim read the attacker's value: \(summary ?? "nothing")")
        #expect((counts["good"] ?? 0) > 0, "victim: \(summary ?? "nothing"); \(errors)")
        #expect(try Data(contentsOf: sentinel) == sentinelText, "the file behind the planted lock.mdb was written")
        #expect(swaps.withLock { $0 } > 0)
        print(
            "directory swap race: \(swaps.withLock { $0 }) swaps; victim \(summary ?? "nothing"); first refusal: \(errors)"
        )
    }
}

/// Users and system calls for ``TwoUserAttackTests``.
enum TwoUsers {
    static let nobody = ForeignOwnerTests.nobody

    /// The helper can be run as nobody: every directory on its path is searchable by others.
    static let helperRunsAsNobody: Bool = {
        guard geteuid() == 0 else { return false }
        var path = HelperProcess.executable("cache-test-helper").deletingLastPathComponent()
        while path.path != "/" {
            var info = stat()
            guard stat(path.path, &info) == 0, info.st_mode & 0o001 != 0 else { return false }
            path.deleteLastPathComponent()
        }
        return true
    }()

    /// The regular files directly in `directory`.
    static func files(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).map {
            directory.appendingPathComponent($0).path
        }
    }

    /// `renameat2(a, b, RENAME_EXCHANGE)`: swaps two names atomically.
    static func exchange(_ first: String, _ second: String) -> Bool {
        renameExchange(AT_FDCWD, first, AT_FDCWD, second, 2 /* RENAME_EXCHANGE */) == 0
    }

    private typealias RenameAt2 =
        @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32)
        -> Int32
    private static let renameExchange: RenameAt2 = unsafeBitCast(dlsym(nil, "renameat2"), to: RenameAt2.self)

    /// "good 3 poisoned 0 …" as a dictionary.
    static func counts(_ summary: String) -> [String: Int] {
        let words = summary.split(separator: " ").map(String.init)
        var counts: [String: Int] = [:]
        for index in stride(from: 0, to: words.count - 1, by: 2) { counts[words[index]] = Int(words[index + 1]) }
        return counts
    }
}
