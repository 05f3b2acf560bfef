import CacheTestSupport
import Foundation
import Glibc
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// `cache-dump readers` decides whether a slot's process is alive as LMDB does (the process
/// holds a lock on the byte of `lock.mdb` at its pid), so a pid another program has taken since
/// the reader died is stale, and that program's name is never shown as the reader's; a process
/// name is printed escaped.
@Suite("cache-dump readers: liveness from LMDB's pid lock, process names escaped")
struct ReaderLivenessTests {
    @Test("a reader whose process name holds escape sequences is listed with them escaped")
    func escapedCommandName() throws {
        let cache = try SampleCache(count: 1)
        defer { cache.remove() }
        let name = "\u{1B}]0;pwn\u{07}\u{1B}[2J"  // 11 bytes: a title change, a bell, a screen clear
        let holder = try HelperProcess(["hold-named", cache.path, name])
        defer { holder.kill() }
        #expect(holder.readLine() == "open")
        let pid = Int(holder.processIdentifier)
        #expect(
            try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8) == name + "\n",
            "the helper renamed itself")

        let text = try CacheDumpRun(["readers", cache.path])
        #expect(text.status == 0, "\(text.errorText)")
        TerminalEscapeTests.expectNothingRaw(text.output)
        let row = try #require(text.lines.first { $0.hasPrefix("\(pid) ") }, "\(text.text)")
        #expect(row.contains("alive"))
        #expect(row.hasSuffix(#"\x1b]0;pwn\x07\x1b[2J"#), "\(row)")

        let json = try CacheDumpRun(["readers", cache.path, "--json"])
        TerminalEscapeTests.expectNothingRaw(json.output)
        let slots = try #require(try json.json() as? [[String: Any]])
        let slot = try #require(slots.first { $0["pid"] as? Int == pid }, "\(slots)")
        #expect(slot["command"] as? String == #"\x1b]0;pwn\x07\x1b[2J"#)
    }

    @Test("a killed reader's slot whose pid now belongs to a live process of the same user is stale")
    func pidReusedBySameUser() throws {
        try Self.checkReusedPid(otherUser: false)
    }

    @Test(
        "a killed reader's slot whose pid now belongs to another user's live process is stale, its name not shown",
        .enabled(
            if: geteuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"),
            "needs root and setpriv to run a process as uid 65534"))
    func pidReusedByAnotherUser() throws {
        try Self.checkReusedPid(otherUser: true)
    }

    /// Kills a reader with SIGKILL and gives its slot the pid of a live `cat` (run as uid 65534
    /// when `otherUser`) that never opened the store: as if the kernel had handed the dead
    /// reader's pid to it. `readers`, `stats` and `readers --clear-stale` must all see the slot
    /// as stale.
    static func checkReusedPid(otherUser: Bool) throws {
        let cache = try SampleCache(count: 1)
        defer { cache.remove() }
        // LMDB resets the reader table when the last process leaves: one holder stays.
        let staying = try HelperProcess(["hold", cache.path])
        defer { staying.kill() }
        let leaving = try HelperProcess(["hold", cache.path])
        #expect(staying.readLine() == "open" && leaving.readLine() == "open")
        let leavingID = leaving.processIdentifier
        leaving.kill()

        let stranger = try Stranger(otherUser: otherUser)
        defer { stranger.end() }
        let pid = stranger.processIdentifier
        if otherUser {
            #expect(try Self.realUserID(pid) == 65_534, "the stranger runs as another user")
        }
        try Self.reassignReaderSlot(lockFile: cache.path + "/lock.mdb", from: leavingID, to: pid)

        let json = try CacheDumpRun(["readers", cache.path, "--json"])
        #expect(json.status == 0, "\(json.errorText)")
        let slots = try #require(try json.json() as? [[String: Any]])
        let slot = try #require(slots.first { $0["pid"] as? Int == Int(pid) }, "\(slots)")
        #expect(slot["stale"] as? Bool == true, "\(slot)")
        #expect(slot["command"] as? String == nil, "the stranger's name is not the reader's: \(slot)")
        let text = try CacheDumpRun(["readers", cache.path])
        let row = try #require(text.lines.first { $0.hasPrefix("\(pid) ") }, "\(text.text)")
        #expect(row.contains("stale") && !row.contains("cat"), "\(row)")
        #expect(
            text.lines.contains { $0.hasPrefix("\(staying.processIdentifier) ") && $0.contains("alive") },
            "\(text.text)")

        let stats = try #require(try CacheDumpRun(["stats", cache.path, "--json"]).json() as? [String: Any])
        #expect(stats["staleReaderSlots"] as? Int == 1, "\(stats)")
        let cleared = try CacheDumpRun(["readers", cache.path, "--clear-stale"])
        #expect(cleared.lines.last == "cleared 1 stale reader slot", "LMDB agrees: \(cleared.text)")
        #expect(stranger.isRunning, "the stranger was never signalled")
    }

    /// Overwrites the pid of the reader slot holding `from` in `lock.mdb` with `to`. LMDB's reader
    /// table (0.9, 64-byte cache lines) is an array of 64-byte slots after two 64-byte header
    /// blocks; a slot holds the transaction id (8 bytes), then the pid (4 bytes, native order).
    static func reassignReaderSlot(lockFile: String, from: Int32, to: Int32) throws {
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: lockFile))
        defer { try? handle.close() }
        let bytes = [UInt8](try handle.readToEnd() ?? Data())
        let wanted = withUnsafeBytes(of: from.littleEndian, Array.init)
        let offsets = stride(from: 128 + 8, to: bytes.count - 4, by: 64).filter { Array(bytes[$0..<$0 + 4]) == wanted }
        try #require(offsets.count == 1, "one slot holds pid \(from): \(offsets)")
        try handle.seek(toOffset: UInt64(offsets[0]))
        try handle.write(contentsOf: withUnsafeBytes(of: to.littleEndian, Array.init))
    }

    /// The real user id of process `pid`, from /proc.
    static func realUserID(_ pid: Int32) throws -> Int? {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let line = status.split(separator: "\n").first { $0.hasPrefix("Uid:") }
        return line?.split(whereSeparator: \.isWhitespace).dropFirst().first.flatMap { Int($0) }
    }
}

/// A live process that has nothing to do with the cache: `cat` between two pipes, run as uid
/// 65534 through `setpriv` when asked. Started once it has echoed a line back, so it has exec'd
/// (and changed user) by then.
final class Stranger {
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()

    init(otherUser: Bool) throws {
        if otherUser {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
            process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "--", "/bin/cat"]
        } else {
            process.executableURL = URL(fileURLWithPath: "/bin/cat")
        }
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        input.fileHandleForWriting.write(Data("ready\n".utf8))
        var echoed: [UInt8] = []
        while !echoed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            echoed += chunk
        }
        try #require(echoed == Array("ready\n".utf8), "cat echoed \(echoed)")
    }

    var processIdentifier: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Closes its input, so it ends, and waits for it.
    func end() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
