import Dispatch
import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// The two tiers never disagree about a key in a way a later read can see: a write the disk
/// refuses, a reader's removal of an undecodable value, and concurrent writers of one key all
/// leave memory and disk holding the same value (or the disk holding none).
@Suite("Two-tier cache: tiers agree")
struct TierConsistencyTests {
    static func open(
        _ dir: TemporaryDirectory, codec: GatedStringCodec = GatedStringCodec(), diskCostLimit: Int? = nil
    ) throws -> Cache<String, String> {
        var configuration = Cache<String, String>.Configuration(codec: codec)
        configuration.disk.costLimit = diskCostLimit
        configuration.disk.automaticTrimming = false
        configuration.memory.automaticTrimming = false
        return try Cache(directory: dir.url, configuration: configuration)
    }

    enum Refusal: String, CaseIterable, Sendable { case tooLarge, unencodable }

    @Test(
        "a value the disk refuses takes the value it replaced off disk, so the old one never comes back",
        arguments: Refusal.allCases)
    func refusedWriteRemovesReplacedValue(_ refusal: Refusal) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        // Letters in a seeded random order: deflate cannot bring them under the 4 KiB limit.
        var random = SeededLetters(seed: 12)
        let refused = refusal == .tooLarge ? String((0..<8_192).map { _ in random.next() }) : "unencodable"
        do {
            let cache = try Self.open(dir, diskCostLimit: 4_096)
            cache["k"] = "old"
            try cache.flush()
            cache["k"] = refused
            #expect(cache["k"] == refused, "the new value stays readable from memory")
            #expect(throws: CacheError.self, "flush still reports the refusal") { try cache.flush() }
            #expect(try cache.disk?.containsData(forKey: "k".cacheKeyBytes) == false)
            cache.memory.removeAll()
            #expect(cache["k"] == nil, "once out of memory, the replaced value is not served")
            cache.close()
        }
        let reopened = try Self.open(dir, diskCostLimit: 4_096)
        defer { reopened.close() }
        #expect(reopened["k"] == nil, "nor after a restart")
    }

    @Test(
        "removing an undecodable value never removes a write that replaced it during the decode",
        arguments: [true, false])
    func undecodableRemovalKeepsNewerWrite(newerWriteCommitted: Bool) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let codec = GatedStringCodec(stoppingAt: .decode, for: "undecodable")
        let cache = try Self.open(dir, codec: codec)
        defer { cache.close() }
        let key = "k".cacheKeyBytes
        try cache.disk?.setData(Array("undecodable".utf8), forKey: key)
        try cache.flush()
        let reader = DispatchGroup()
        let readValue = Locked<String??>(nil)
        DispatchQueue.global().async(group: reader) {
            let value = cache["k"]
            readValue.withLock { $0 = value }
        }
        // The reader has the undecodable record and is inside decode: a newer write lands now.
        codec.entered.wait()
        cache["k"] = "new"
        if newerWriteCommitted { try cache.flush() }
        codec.release.signal()
        reader.wait()
        #expect(readValue.withLock { $0 } == .some(nil), "the undecodable value was a miss")
        try cache.flush()
        #expect(try cache.disk?.data(forKey: key) == Array("new".utf8), "the newer write is still on disk")
        cache.memory.removeAll()
        #expect(cache["k"] == "new")

        // With no newer write, the undecodable record is still removed.
        try cache.disk?.setData(Array("undecodable".utf8), forKey: key)
        cache.memory.removeAll()
        #expect(cache["k"] == nil)
        try cache.flush()
        #expect(try cache.disk?.containsData(forKey: key) == false)
    }

    /// Rounds of concurrent inserts of distinct values for a few keys; after each round, every
    /// key's memory value must be its disk value (reads of the disk see queued writes).
    @Test("concurrent inserts of one key leave memory and disk holding the same value")
    func concurrentInsertsAgree() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let cache = try Self.open(dir)
        defer { cache.close() }
        let writers = 4
        let keys = (0..<4).map { "key\($0)" }
        let rounds = 400
        var compared = 0
        var disagreements: [String] = []
        for round in 0..<rounds {
            DispatchQueue.concurrentPerform(iterations: writers) { writer in
                // Each writer walks the keys from a different start, so pairs meet on every key.
                for offset in 0..<keys.count {
                    let key = keys[(writer + offset) % keys.count]
                    cache.insert("round \(round) writer \(writer)", forKey: key)
                    if offset % 2 == 1 { cache.removeValue(forKey: keys[(writer + offset + 1) % keys.count]) }
                }
            }
            for key in keys {
                let inMemory = cache.memory.value(forKey: key)
                let onDisk = try cache.disk?.data(forKey: key.cacheKeyBytes).map { String(decoding: $0, as: UTF8.self) }
                compared += 1
                if inMemory != onDisk {
                    disagreements.append("round \(round) \(key): \(inMemory ?? "nil") / \(onDisk ?? "nil")")
                }
            }
        }
        try cache.flush()
        #expect(compared == rounds * keys.count)
        #expect(disagreements.isEmpty, "\(disagreements.count) of \(compared) disagree (memory / disk): \(disagreements.prefix(5))")
    }
}

/// Letters from a xorshift generator, reproducible from the seed.
struct SeededLetters {
    private var state: UInt64

    init(seed: UInt64) { state = seed | 1 }

    mutating func next() -> Character {
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        let letters = Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        return letters[Int(state % UInt64(letters.count))]
    }
}
