import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

/// Every command that reads the store's pages, with the arguments it needs.
private let pageReadingCommands: [[String]] = [
    ["stats"], ["stats", "--json"], ["list"], ["get", "key1"], ["verify"], ["verify", "--repair"], ["export"],
    ["compact"], ["readers"], ["trim", "--count", "10"], ["rm", "key1"], ["clear", "--yes"],
]

/// The commands run on randomly flipped stores: those that only read, and compact (a copy).
/// Commands that delete (trim, rm, clear, verify --repair) are left out: on such a store
/// LMDB's `mdb_del` was seen to loop forever on a damaged page (a hang, not a fault, which no
/// child process contains); the truncated store above covers them.
private let flippedStoreCommands: [[String]] = [
    ["stats"], ["stats", "--json"], ["list"], ["get", "key1"], ["verify"], ["export"], ["compact"], ["readers"],
]

@Suite("cache-dump on a damaged store: never a signal, exit 4 with a one-line reason", .serialized)
struct DamagedStoreCommandTests {
    /// A closed store of `count` entries (SampleCache's), with its data.mdb changed by `damage`.
    static func damagedStore(count: Int, label: String = #function, _ damage: (inout [UInt8]) -> Void) throws
        -> SampleCache
    {
        let cache = try SampleCache(count: count, label: label)
        let file = cache.directory.url.appendingPathComponent("data.mdb")
        var contents = [UInt8](try Data(contentsOf: file))
        damage(&contents)
        try Data(contents).write(to: file)
        return cache
    }

    /// A copy of `cache`'s directory, so each command meets the damage as it was made.
    static func copy(of cache: SampleCache) throws -> TemporaryDirectory {
        let copy = TemporaryDirectory("damagedStoreCopy")
        try FileManager.default.copyItem(at: cache.directory.url, to: copy.url)
        return copy
    }

    @Test("a truncated data.mdb: every command that reads pages exits 4 with one line, none dies of a signal")
    func truncatedStoreNeverKillsCacheDump() throws {
        // Half the file, on a page boundary: the newest meta page counts pages past the end, which
        // read-only opens do not cover, so the first read past it would be SIGBUS.
        let cache = try Self.damagedStore(count: 2_000) { contents in
            contents.removeLast(contents.count - contents.count / 2 / 4_096 * 4_096)
        }
        defer { cache.remove() }
        for command in pageReadingCommands {
            let copy = try Self.copy(of: cache)
            defer { copy.remove() }
            let run = try CacheDumpRun([command[0], copy.path] + command.dropFirst())
            #expect(
                run.signal == nil, "\(command) died of signal \(run.signal ?? 0); stderr: \(run.errorText.prefix(300))")
            if run.status != 0 && run.status != 1 {
                run.expectFailure(4, mentioning: "damaged")
            }
        }
        // The read-only commands cannot extend the file, so the truncation is theirs to meet.
        for command in [["stats"], ["verify"], ["list"], ["export"]] {
            let copy = try Self.copy(of: cache)
            defer { copy.remove() }
            try CacheDumpRun([command[0], copy.path] + command.dropFirst()).expectFailure(4, mentioning: "damaged")
        }
    }

    @Test(
        "300 random bytes flipped in the middle half of a 5,000-entry data.mdb: never a signal; a failure is exit 4 in one line",
        arguments: [1, 2, 3] as [UInt64])
    func flippedStoreNeverKillsCacheDump(seed: UInt64) throws {
        var random = SeededGenerator(seed: seed)
        let cache = try Self.damagedStore(count: 5_000) { contents in
            let quarter = contents.count / 4
            for _ in 0..<300 {
                contents[Int.random(in: quarter..<(3 * quarter), using: &random)] ^= UInt8.random(
                    in: 1...255, using: &random)
            }
        }
        defer { cache.remove() }
        var statuses: [String: Int32] = [:]
        for command in flippedStoreCommands {
            let copy = try Self.copy(of: cache)
            defer { copy.remove() }
            let run = try CacheDumpRun([command[0], copy.path] + command.dropFirst())
            statuses[command.joined(separator: " ")] = run.status
            #expect(
                run.signal == nil, "\(command) died of signal \(run.signal ?? 0); stderr: \(run.errorText.prefix(300))")
            #expect([0, 1, 2, 4].contains(run.status), "\(command) exited \(run.status): \(run.errorText.prefix(300))")
            // Commands that go on past damaged records say so on a line each (export, verify),
            // and a glibc heap check may have printed its own line: the reason is the last line.
            let last = run.errorText.split(separator: "\n").last.map(String.init) ?? ""
            if run.status == 4 {
                #expect(last.hasPrefix("cache-dump: ") && last.contains("damaged"), "\(command): \(last)")
            }
            #expect(!run.errorText.contains("Backtracing") && !run.errorText.contains("crashed"), "\(command): a trace")
        }
        print(
            "seed \(seed): \(statuses.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ", "))"
        )
    }
}

/// SplitMix64: a seeded generator, so a damaged file can be made again from its seed.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
