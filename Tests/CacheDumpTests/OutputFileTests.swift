import CacheTestSupport
import Foundation
import Glibc
import Testing

@testable import LMDBCache

/// `get --output` and `export --output` in a directory others can write to: a symbolic link or a
/// file someone put at the path beforehand is refused (status 11), and `--force` replaces it with
/// a new owner-only file instead of writing through it.
@Suite("cache-dump --output: never through a planted link, never into a file that was there")
struct OutputFileTests {
    /// The two subcommands that write a file for the user.
    enum Writer: String, CaseIterable, Sendable {
        case get, export

        func arguments(_ cache: SampleCache, output: String, force: Bool) -> [String] {
            let command = self == .get ? ["get", cache.path, "key1"] : ["export", cache.path]
            return command + ["--output", output] + (force ? ["--force"] : [])
        }

        /// What it writes for `cache`: the value of key1, or the export (as written to stdout).
        func expected(_ cache: SampleCache) throws -> [UInt8] {
            switch self {
            case .get: return SampleCache.value(1)
            case .export: return try CacheDumpRun(["export", cache.path]).output
            }
        }
    }

    @Test(
        "a symbolic link at the path is refused, its target untouched; --force replaces the link with an owner-only file",
        arguments: Writer.allCases)
    func symbolicLink(writer: Writer) throws {
        let cache = try SampleCache(count: 4)
        defer { cache.remove() }
        let shared = try Self.sharedDirectory()
        defer { shared.remove() }
        let sentinel = shared.url.appendingPathComponent("authorized_keys").path
        let sentinelBytes = Array("ssh-ed25519 AAAA admin\n".utf8)
        try Data(sentinelBytes).write(to: URL(fileURLWithPath: sentinel))
        let output = shared.url.appendingPathComponent("out").path
        try FileManager.default.createSymbolicLink(atPath: output, withDestinationPath: sentinel)

        try CacheDumpRun(writer.arguments(cache, output: output, force: false))
            .expectFailure(11, mentioning: "\(output) exists")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: sentinel))) == sentinelBytes)
        #expect(try Self.status(output).st_mode & S_IFMT == S_IFLNK, "the link is left as it was")

        let forced = try CacheDumpRun(writer.arguments(cache, output: output, force: true))
        #expect(forced.status == 0, "\(forced.errorText)")
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: sentinel))) == sentinelBytes, "never followed")
        try Self.expectOwnerOnlyFile(output, holding: try writer.expected(cache))
        #expect(try Self.names(shared) == ["authorized_keys", "out"], "no temporary file left")
    }

    @Test("a dangling symbolic link is refused and nothing is created where it points", arguments: Writer.allCases)
    func danglingSymbolicLink(writer: Writer) throws {
        let cache = try SampleCache(count: 4)
        defer { cache.remove() }
        let shared = try Self.sharedDirectory()
        defer { shared.remove() }
        let target = shared.url.appendingPathComponent("created-through-the-link").path
        let output = shared.url.appendingPathComponent("out").path
        try FileManager.default.createSymbolicLink(atPath: output, withDestinationPath: target)
        try CacheDumpRun(writer.arguments(cache, output: output, force: false))
            .expectFailure(11, mentioning: "\(output) exists")
        #expect(!FileManager.default.fileExists(atPath: target))
        #expect(try Self.names(shared) == ["out"])
    }

    @Test(
        "a file made 0666 beforehand is refused and left as it was; --force replaces it: 0600, ours, one link",
        arguments: Writer.allCases)
    func precreatedFile(writer: Writer) throws {
        let cache = try SampleCache(count: 4)
        defer { cache.remove() }
        let shared = try Self.sharedDirectory()
        defer { shared.remove() }
        let output = shared.url.appendingPathComponent("out").path
        try Data("planted\n".utf8).write(to: URL(fileURLWithPath: output))
        #expect(chmod(output, 0o666) == 0)

        try CacheDumpRun(writer.arguments(cache, output: output, force: false))
            .expectFailure(11, mentioning: "--force")
        #expect(try String(contentsOfFile: output, encoding: .utf8) == "planted\n")
        #expect(try Self.status(output).st_mode & 0o7777 == 0o666)

        let forced = try CacheDumpRun(writer.arguments(cache, output: output, force: true))
        #expect(forced.status == 0, "\(forced.errorText)")
        try Self.expectOwnerOnlyFile(output, holding: try writer.expected(cache))
        #expect(try Self.names(shared) == ["out"], "no temporary file left")
    }

    @Test(
        "--force on a hard-linked file writes a new file: the other link keeps its contents", arguments: Writer.allCases
    )
    func hardLinkedFile(writer: Writer) throws {
        let cache = try SampleCache(count: 4)
        defer { cache.remove() }
        let shared = try Self.sharedDirectory()
        defer { shared.remove() }
        let output = shared.url.appendingPathComponent("out").path
        let other = shared.url.appendingPathComponent("other-link").path
        try Data("old contents\n".utf8).write(to: URL(fileURLWithPath: output))
        #expect(link(output, other) == 0)

        try CacheDumpRun(writer.arguments(cache, output: output, force: false))
            .expectFailure(11, mentioning: "exists")
        let forced = try CacheDumpRun(writer.arguments(cache, output: output, force: true))
        #expect(forced.status == 0, "\(forced.errorText)")
        try Self.expectOwnerOnlyFile(output, holding: try writer.expected(cache))
        #expect(try String(contentsOfFile: other, encoding: .utf8) == "old contents\n")
        #expect(try Self.status(other).st_nlink == 1)
        #expect(try Self.names(shared) == ["other-link", "out"], "no temporary file left")
    }

    @Test(
        "without an existing file, --output (with or without --force) creates it owner-only", arguments: Writer.allCases
    )
    func newFile(writer: Writer) throws {
        let cache = try SampleCache(count: 4)
        defer { cache.remove() }
        let shared = try Self.sharedDirectory()
        defer { shared.remove() }
        let output = shared.url.appendingPathComponent("out").path
        let run = try CacheDumpRun(writer.arguments(cache, output: output, force: false))
        #expect(run.status == 0, "\(run.errorText)")
        try Self.expectOwnerOnlyFile(output, holding: try writer.expected(cache))
        let forced = try CacheDumpRun(writer.arguments(cache, output: shared.path + "/forced", force: true))
        #expect(forced.status == 0, "\(forced.errorText)")
        try Self.expectOwnerOnlyFile(shared.path + "/forced", holding: try writer.expected(cache))
        #expect(try Self.names(shared) == ["forced", "out"])
    }
}

extension OutputFileTests {
    /// A directory anyone can write to, like /tmp (sticky, 1777).
    static func sharedDirectory(_ label: String = #function) throws -> TemporaryDirectory {
        let directory = TemporaryDirectory(label)
        try FileManager.default.createDirectory(at: directory.url, withIntermediateDirectories: true)
        #expect(chmod(directory.path, 0o1777) == 0)
        return directory
    }

    /// `lstat` of `path`.
    static func status(_ path: String) throws -> stat {
        var info = stat()
        guard lstat(path, &info) == 0 else { throw CocoaError(.fileNoSuchFile) }
        return info
    }

    static func names(_ directory: TemporaryDirectory) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted()
    }

    /// `path` is a regular file (not a link), mode 0600, owned by this process's user, with one
    /// link, holding `bytes`.
    static func expectOwnerOnlyFile(
        _ path: String, holding bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let info = try status(path)
        #expect(info.st_mode & S_IFMT == S_IFREG, "a regular file", sourceLocation: sourceLocation)
        #expect(
            info.st_mode & 0o7777 == 0o600, "mode \(String(info.st_mode & 0o7777, radix: 8))",
            sourceLocation: sourceLocation)
        #expect(info.st_uid == geteuid(), sourceLocation: sourceLocation)
        #expect(info.st_nlink == 1, sourceLocation: sourceLocation)
        #expect([UInt8](try Data(contentsOf: URL(fileURLWithPath: path))) == bytes, sourceLocation: sourceLocation)
    }
}
