import Foundation
import Glibc
import Testing

@testable import LMDBCache

@Suite("Reliability: security of the cache directory")
struct SecurityTests {
    /// Every file and directory below `root`, `root` included, with its permission bits.
    static func modes(below root: URL) throws -> [(String, Int)] {
        var modes = [
            (
                root.path,
                try #require(try FileManager.default.attributesOfItem(atPath: root.path)[.posixPermissions] as? Int)
            )
        ]
        for path in try FileManager.default.subpathsOfDirectory(atPath: root.path) {
            let full = root.appendingPathComponent(path).path
            modes.append(
                (path, try #require(try FileManager.default.attributesOfItem(atPath: full)[.posixPermissions] as? Int)))
        }
        return modes
    }

    @Test("an existing cache directory open to other users is used with a warning that says so")
    func looseDirectoryWarned() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        #expect(chmod(dir.path, 0o755) == 0)
        let log = CapturedLog()
        let disk = try DiskCache(directory: dir.url, logger: log.logger)
        disk.close()
        #expect(log.messages(atLeast: .warning).contains { $0.contains("open to other users") })
        #expect(chmod(dir.path, 0o700) == 0)
        let quiet = CapturedLog()
        try DiskCache(directory: dir.url, logger: quiet.logger).close()
        #expect(quiet.messages(atLeast: .warning).isEmpty)
    }

    @Test("everything the cache creates, after writes, a trim and a compaction, is owner-only")
    func everythingOwnerOnly() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cacheDirectory = dir.url.appendingPathComponent("a/b/cache")
        let disk = try DiskCache(directory: cacheDirectory)
        for index in 0..<200 {
            try disk.setData(sampleBytes(count: 3_000, compressible: index % 2 == 0), forKey: "k\(index)")
        }
        try disk.flush()
        try disk.trim(toCount: 50)
        try disk.compact()
        disk.close()
        for (path, mode) in try Self.modes(below: dir.url.appendingPathComponent("a")) {
            #expect(mode & 0o077 == 0, "\(path) has mode \(String(mode, radix: 8))")
        }
    }

    @Test(
        "a cache name never leaves the cache root",
        arguments: ["..a", "a..", ".hidden", "name with spaces", "ünïcode", "a\\b", "-rf", "~"])
    func namesStayInsideTheRoot(name: String) throws {
        let environment = ["XDG_CACHE_HOME": "/srv/cache", "HOME": "/home/u"]
        let directory = try CacheDirectory.named(name, environment: environment).standardizedFileURL
        #expect(directory.deletingLastPathComponent().path == "/srv/cache", "\(name) resolved to \(directory.path)")
        #expect(directory.lastPathComponent == name)
    }

    @Test(
        "names that could leave the root are refused",
        arguments: ["", ".", "..", "../etc", "a/../../b", "/abs", "a/b", "x\0y"])
    func escapingNamesRefused(name: String) {
        #expect {
            _ = try CacheDirectory.named(name, environment: ["XDG_CACHE_HOME": "/srv/cache"])
        } throws: { error in
            guard case .invalidName(let rejected, _) = error as? CacheError else { return false }
            return rejected == name
        }
    }

    /// A relative `$XDG_CACHE_HOME` is ignored (the XDG spec's rule); a relative `$HOME` has no
    /// such fallback, and resolving it would write below the working directory: it is refused.
    @Test("a relative HOME is refused, never resolved against the working directory", arguments: ["home/u", ".", "~u"])
    func relativeHomeRefused(home: String) throws {
        for environment in [["HOME": home], ["HOME": home, "XDG_CACHE_HOME": "relative/cache"]] {
            #expect {
                _ = try CacheDirectory.named("articles", environment: environment)
            } throws: { error in
                guard case .directoryUnavailable(let path, let reason) = error as? CacheError else { return false }
                return path == home && reason.contains("HOME") && reason.contains("absolute")
            }
        }
        let xdg = try CacheDirectory.named("articles", environment: ["HOME": home, "XDG_CACHE_HOME": "/srv/cache"])
        #expect(xdg.path == "/srv/cache/articles", "an absolute XDG_CACHE_HOME needs no HOME")
    }
}

/// Ownership checks change a file's owner, which needs root (root also passes every permission
/// check, so the library checks ownership itself).
@Suite(
    "Reliability: a cache directory of another user", .serialized,
    .enabled(if: geteuid() == 0, "changing a file's owner needs root"))
struct ForeignOwnerTests {
    static let nobody: uid_t = getpwnam("nobody")?.pointee.pw_uid ?? 65_534

    static func expectRefused(_ directory: URL, mentioning fragment: String) {
        #expect {
            _ = try DiskCache(directory: directory)
        } throws: { error in
            guard case .directoryUnavailable(let path, let reason) = error as? CacheError else { return false }
            return path == directory.standardizedFileURL.path && reason.contains(fragment)
        }
    }

    @Test("a cache directory owned by another user is refused with a clear error")
    func foreignDirectoryRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        #expect(chown(dir.path, Self.nobody, gid_t(Self.nobody)) == 0)
        Self.expectRefused(dir.url, mentioning: "belongs to uid \(Self.nobody)")
        #expect(
            !FileManager.default.fileExists(atPath: dir.url.appendingPathComponent("data.mdb").path),
            "nothing was created in it")
        #expect {
            _ = try Cache<String, String>(directory: dir.url, configuration: .init())
        } throws: { error in
            (error as? CacheError).map { "\($0)".contains("must belong to the user that opens it") } ?? false
        }
    }

    @Test("a store file owned by another user is refused")
    func foreignStoreFileRefused() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            try disk.setData([1], forKey: "k")
            disk.close()
        }
        #expect(chown(dir.path + "/data.mdb", Self.nobody, gid_t(Self.nobody)) == 0)
        Self.expectRefused(dir.url, mentioning: "data.mdb belongs to uid \(Self.nobody)")
    }

    @Test("a store file that is a symbolic link is refused, and its target is left alone")
    func symlinkedStoreFileRefused() throws {
        let dir = TemporaryDirectory()
        let outside = TemporaryDirectory()
        defer {
            dir.remove()
            outside.remove()
        }
        try FileManager.default.createDirectory(at: dir.url, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside.url, withIntermediateDirectories: true)
        let target = outside.url.appendingPathComponent("precious")
        try Data("do not touch".utf8).write(to: target)
        try FileManager.default.createSymbolicLink(
            atPath: dir.url.appendingPathComponent("data.mdb").path, withDestinationPath: target.path)
        Self.expectRefused(dir.url, mentioning: "data.mdb is a symbolic link")
        #expect(try Data(contentsOf: target) == Data("do not touch".utf8))
    }
}
