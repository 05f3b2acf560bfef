import Foundation
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// The disk tier's change log (Disk/DiskStore+ChangeLog.swift): what is appended and in which
/// order, its capacity, reads from every position, damage in it, and the decoder of its entries.
/// Followers are polled by the test (`followChanges()`), never waited for.
@Suite("Coherence: the change log")
struct ChangeLogTests {
    typealias StringCache = Cache<String, String>

    static func openDisk(_ dir: TemporaryDirectory) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.automaticTrimming = false
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    static func openCache(_ dir: TemporaryDirectory) throws -> StringCache {
        var configuration = StringCache.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        configuration.coherence = .init(pollInterval: .seconds(3_600))
        return try Cache(directory: dir.url, configuration: configuration)
    }

    /// What the store's log holds after `position`, read as a follower reads it.
    static func read(_ disk: DiskCache, after position: UInt64, limit: Int = 1 << 20) throws
        -> (changes: [CacheChange], head: UInt64)?
    {
        switch try disk.withStore({ try $0.changes(after: position, limit: limit) }) {
        case .changes(let changes, let head): return (changes, head)
        case .fellBehind: return nil
        }
    }

    static func head(_ disk: DiskCache) throws -> UInt64 {
        try disk.withStore { try $0.changeHead() }
    }

    /// Entries of the `changes` database and its first and last keys.
    static func logShape(_ disk: DiskCache) throws -> (count: Int, first: [UInt8]?, last: [UInt8]?) {
        try disk.withStore { store in
            try store.env.read { txn in
                (try txn.count(store.db.changes), try txn.firstKey(store.db.changes), try txn.lastKey(store.db.changes))
            }
        }
    }

    /// Runs `body` in a write transaction on the store's writer.
    static func write(_ disk: DiskCache, _ body: (DiskStore, WriteTransaction) throws -> Void) throws {
        try disk.withStore { store in
            try store.env.writer.sync { try store.env.write { txn in try body(store, txn) } }
        }
    }

    static func summary(_ change: CacheChange) -> String {
        "\(change.kind) \(change.origin) \(String(decoding: change.subject.prefix(12), as: UTF8.self))"
    }

    @Test("every write, removal, tag removal and removeAll is appended in commit order with its origin and time")
    func orderAndOrigins() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let cache = try Self.openCache(dir)
        defer {
            cache.close()
            disk.close()
        }
        let start = try Self.head(disk)
        let before = UInt64(Date().timeIntervalSince1970 * 1_000) - 1
        let long = String(repeating: "l", count: 700)
        try disk.setData([1], forKey: "k1")
        try disk.flush()
        try disk.setData([2], forKey: Array("k2".utf8), tags: ["t"])
        try disk.flush()
        try disk.removeData(forKey: "k1")
        try disk.flush()
        try disk.removeAll(taggedWith: "t")
        cache.insert("x", forKey: "c1")
        try cache.flush()
        cache.removeValue(forKey: "c1")
        try cache.flush()
        cache.removeAll(taggedWith: "caf\u{E9}")
        cache.insert("L", forKey: long)
        try cache.flush()
        try disk.removeAll()
        cache.removeAll()
        let after = UInt64(Date().timeIntervalSince1970 * 1_000) + 1
        let o = cache.origin
        let expected: [(CacheChange.Kind, UInt64, [UInt8])] = [
            (.key, 0, Array("k1".utf8)), (.key, 0, Array("k2".utf8)), (.key, 0, Array("k1".utf8)),
            (.tag, 0, Array("t".utf8)), (.key, o, Array("c1".utf8)), (.key, o, Array("c1".utf8)),
            (.tag, o, Array("caf\u{E9}".utf8)), (.key, o, Array(long.utf8)), (.all, 0, []), (.all, o, []),
        ]
        let read = try #require(try Self.read(disk, after: start))
        #expect(read.head == start + UInt64(expected.count))
        #expect(try Self.head(disk) == read.head)
        #expect(read.changes.count == expected.count, "\(read.changes.map(Self.summary))")
        for (index, (change, want)) in zip(read.changes, expected).enumerated() {
            #expect(
                change.kind == want.0 && change.origin == want.1 && change.subject == want.2,
                "change \(index): \(Self.summary(change))")
            #expect((before...after).contains(change.time), "change \(index): time \(change.time)")
        }
        #expect(o != 0, "a cache's origin is nonzero")
    }

    @Test("changes(after:limit:) at the head, behind it (with limits) and ahead of it")
    func readPositions() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        defer { disk.close() }
        #expect(try Self.head(disk) == 0, "a new store's log is empty")
        #expect(try Self.read(disk, after: 0)?.changes.isEmpty == true)
        #expect(try Self.read(disk, after: 1) == nil, "a position past the head fell behind (the store was replaced)")
        for index in 0..<6 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            try disk.flush()
        }
        let head = try Self.head(disk)
        #expect(head == 6)
        let atHead = try #require(try Self.read(disk, after: head))
        #expect(atHead.changes.isEmpty && atHead.head == head)
        let all = try #require(try Self.read(disk, after: 0))
        #expect(all.changes.map(\.subject) == (0..<6).map { Array("k\($0)".utf8) } && all.head == head)
        let behind = try #require(try Self.read(disk, after: head - 3, limit: 10))
        #expect(behind.changes.map(\.subject) == [Array("k3".utf8), Array("k4".utf8), Array("k5".utf8)])
        #expect(behind.head == head)
        let limited = try #require(try Self.read(disk, after: head - 3, limit: 2))
        #expect(limited.changes.map(\.subject) == [Array("k3".utf8), Array("k4".utf8)])
        #expect(limited.head == head - 1, "the position after the last change delivered")
        let rest = try #require(try Self.read(disk, after: limited.head, limit: 2))
        #expect(rest.changes.map(\.subject) == [Array("k5".utf8)] && rest.head == head)
        #expect(try Self.read(disk, after: head + 1) == nil)
        #expect(try Self.read(disk, after: .max) == nil)
    }

    @Test("the log keeps at most 65,536 changes; a follower behind them gets fellBehind and drops its memory tier")
    func capacity() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let follower = try Self.openCache(dir)
        defer {
            follower.close()
            disk.close()
        }
        follower.insert("mine", forKey: "mine")
        try follower.flush()
        follower.memory.insert("held", forKey: "held")
        let capacity = DiskStore.changeLogCapacity
        let target = capacity + 1_000
        var written = 0
        while try Self.head(disk) < target {
            for _ in 0..<4_000 {
                try disk.setData([UInt8(truncatingIfNeeded: written)], forKey: "k\(written % 20_000)")
                written += 1
            }
            try disk.flush()
        }
        let head = try Self.head(disk)
        let shape = try Self.logShape(disk)
        #expect(UInt64(shape.count) == capacity, "the log holds exactly its capacity once past it")
        #expect(shape.first.flatMap { DiskStore.changeSequence($0) } == head - capacity + 1)
        #expect(shape.last.flatMap { DiskStore.changeSequence($0) } == head)
        let oldest = try #require(try Self.read(disk, after: head - capacity, limit: 3), "the oldest kept is readable")
        #expect(oldest.changes.count == 3 && oldest.head == head - capacity + 3)
        #expect(try Self.read(disk, after: head - capacity - 1) == nil, "one change further back is gone")
        #expect(try Self.read(disk, after: 0) == nil)

        #expect(follower.statistics.memoryTierDrops == 0)
        follower.followChanges()
        #expect(follower.statistics.memoryTierDrops == 1)
        #expect(follower.memory.totalCount == 0, "the memory tier was dropped")
        #expect(follower.value(forKey: "mine") == "mine", "the disk still serves")
        follower.followChanges()
        #expect(follower.statistics.memoryTierDrops == 1, "caught up: no second drop")
        try disk.setData(Array("new".utf8), forKey: "mine")
        try disk.flush()
        follower.followChanges()
        #expect(follower.memory.value(forKey: "mine") == nil)
        #expect(follower.value(forKey: "mine") == "new")
    }

    /// Ways an entry of the log can be damaged in place.
    enum Damage: String, CaseIterable, CustomStringConvertible {
        case garbage, emptyKeySubject, unknownKind, allWithSubject, short, gap
        var description: String { rawValue }
    }

    @Test(
        "a damaged log entry makes a follower drop its memory tier, never crash; it follows on after",
        arguments: Damage.allCases)
    func damagedEntry(_ damage: Damage) throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let follower = try Self.openCache(dir)
        defer {
            follower.close()
            disk.close()
        }
        follower.insert("held", forKey: "held")
        try follower.flush()
        let position = try Self.head(disk)
        for index in 0..<3 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            try disk.flush()
        }
        let damagedKey = DiskStore.changeKey(position + 2)
        try Self.write(disk) { store, txn in
            switch damage {
            case .garbage: try txn.put(store.db.changes, damagedKey, [0xFF, 0x00, 0x13, 0x37])
            case .emptyKeySubject: try txn.put(store.db.changes, damagedKey, CacheChange(kind: .key, origin: 9).encoded)
            case .unknownKind:
                var bytes = CacheChange(kind: .key, origin: 9, subject: [1]).encoded
                bytes[0] = 7
                try txn.put(store.db.changes, damagedKey, bytes)
            case .allWithSubject:
                var bytes = CacheChange(kind: .all, origin: 9).encoded
                bytes.append(1)
                try txn.put(store.db.changes, damagedKey, bytes)
            case .short: try txn.put(store.db.changes, damagedKey, [1, 2, 3])
            case .gap: _ = try txn.delete(store.db.changes, damagedKey)
            }
        }
        #expect(try Self.read(disk, after: position) == nil, "\(damage): reported as changes lost")
        #expect(follower.memory.value(forKey: "held") == "held")
        follower.followChanges()
        #expect(follower.statistics.memoryTierDrops == 1, "\(damage)")
        #expect(follower.memory.totalCount == 0, "\(damage): the memory tier was dropped")
        #expect(follower.value(forKey: "held") == "held", "\(damage): promoted again from disk")
        #expect(follower.value(forKey: "k1") == "\u{1}")
        try disk.setData([42], forKey: "k1")
        try disk.flush()
        follower.followChanges()
        #expect(follower.statistics.memoryTierDrops == 1, "\(damage): past the damage, no more drops")
        #expect(follower.memory.value(forKey: "k1") == nil, "\(damage): the next change is followed")
        #expect(follower.memory.value(forKey: "held") == "held")
        #expect(follower.value(forKey: "k1") == "*")
    }

    @Test("changes with subjects no key or tag has, and this cache's own, are followed without harm")
    func oddButDecodableChanges() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let follower = try Self.openCache(dir)
        defer {
            follower.close()
            disk.close()
        }
        follower.insert("a", forKey: "a", tags: ["t"])
        follower.insert("b", forKey: "b")
        try follower.flush()
        let received = follower.statistics.invalidationsReceived
        try Self.write(disk) { store, txn in
            try store.appendChanges(
                [
                    CacheChange(kind: .key, origin: 5, subject: [0xFF, 0xFE]),  // not UTF-8: no String key
                    CacheChange(kind: .tag, origin: 5, subject: [UInt8](repeating: 0x74, count: 300)),
                    CacheChange(kind: .tag, origin: 5, subject: [0xC3]),
                    CacheChange(kind: .key, origin: follower.origin, subject: Array("a".utf8)),  // its own
                    CacheChange(kind: .tag, origin: follower.origin, subject: Array("t".utf8)),  // its own
                    CacheChange(kind: .key, origin: 5, subject: Array("b".utf8)),
                ], txn)
        }
        follower.followChanges()
        #expect(follower.statistics.invalidationsReceived == received + 4)
        #expect(follower.memory.value(forKey: "a") == "a", "its own changes are skipped")
        #expect(follower.memory.value(forKey: "b") == nil)
        #expect(follower.statistics.memoryTierDrops == 0)
        try Self.write(disk) { store, txn in try store.appendChanges([CacheChange(kind: .all, origin: 5)], txn) }
        follower.followChanges()
        #expect(follower.memory.totalCount == 0, "a removal of everything by another empties the memory tier")
    }

    @Test("a damaged head restarts the log: followers drop their memory tier once and follow on")
    func damagedHead() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let follower = try Self.openCache(dir)
        defer {
            follower.close()
            disk.close()
        }
        for index in 0..<3 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            try disk.flush()
        }
        follower.followChanges()
        #expect(follower.value(forKey: "k0") == "\u{0}")
        try Self.write(disk) { store, txn in
            try Totals.store(txn, store.db.info, DiskStore.changeHeadKey, .max - 3)
        }
        try disk.setData([9], forKey: "k0")
        try disk.flush()
        #expect(try Self.head(disk) == 1, "started again at 1")
        follower.followChanges()
        #expect(follower.statistics.memoryTierDrops >= 1)
        #expect(follower.memory.value(forKey: "k0") == nil)
        #expect(follower.value(forKey: "k0") == "\u{9}")
        let drops = follower.statistics.memoryTierDrops
        for index in 1..<4 {
            try disk.setData([UInt8(20 + index)], forKey: "k0")
            try disk.flush()
            follower.followChanges()
            #expect(follower.memory.value(forKey: "k0") == nil, "write \(index) after the restart is followed")
            #expect(follower.value(forKey: "k0") == String(UnicodeScalar(UInt8(20 + index))))
        }
        #expect(follower.statistics.memoryTierDrops == drops, "no drop once caught up with the new log")
    }

    @Test("a head set back behind the log's newest entries: later changes are still logged, and read at their place")
    func headBehindTheNewestEntry() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        defer { disk.close() }
        for index in 0..<4 {
            try disk.setData([UInt8(index)], forKey: "k\(index)")
            try disk.flush()
        }
        let head = try Self.head(disk)
        #expect(head >= 4)
        // Appends go to the log's end; a key that does not sort last there is put in its place.
        try Self.write(disk) { store, txn in try Totals.store(txn, store.db.info, DiskStore.changeHeadKey, head - 3) }
        try disk.setData([9], forKey: "moved")
        try disk.flush()
        #expect(try Self.head(disk) == head - 2)
        let read = try #require(try Self.read(disk, after: head - 3))
        #expect(read.changes.map(Self.summary) == ["key 0 moved"], "a disk cache's own writes have origin 0")
        #expect(try Self.logShape(disk).count == Int(head), "the entry at head - 2 was replaced, none added")
    }

    @Test("a log entry whose key is not 8 bytes does not lift the log's capacity bound")
    func malformedKeyKeepsTheBound() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        defer { disk.close() }
        try Self.write(disk) { store, txn in
            // Sorts before every 8-byte key: the first entry the log's trimming looks at.
            try txn.put(store.db.changes, [0x00], CacheChange(kind: .all, origin: 1).encoded)
        }
        let capacity = Int(DiskStore.changeLogCapacity)
        let change = CacheChange(kind: .key, origin: 3, subject: [1])
        for _ in 0..<3 {
            try Self.write(disk) { store, txn in
                try store.appendChanges(Array(repeating: change, count: capacity / 2), txn)
            }
        }
        let shape = try Self.logShape(disk)
        #expect(shape.count <= capacity + 1, "the log holds \(shape.count) entries for a capacity of \(capacity)")
    }

    @Test("a log entry whose key is not 8 bytes does not hide the changes after it from a poll")
    func malformedKeyDoesNotStopAPoll() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.openDisk(dir)
        let follower = try Self.openCache(dir)
        defer {
            follower.close()
            disk.close()
        }
        for index in 0..<4 { follower.insert("v\(index)", forKey: "k\(index)") }
        try follower.flush()
        let position = try Self.head(disk)
        try disk.setData(Array("w0".utf8), forKey: "k0")
        try disk.flush()
        try Self.write(disk) { store, txn in
            try txn.put(store.db.changes, DiskStore.changeKey(position + 1) + [0], [0xFF])
        }
        for index in 1..<4 {
            try disk.setData(Array("w\(index)".utf8), forKey: "k\(index)")
            try disk.flush()
        }
        follower.followChanges()
        for index in 0..<4 {
            #expect(follower.memory.value(forKey: "k\(index)") == nil, "k\(index) changed before the poll")
            #expect(follower.value(forKey: "k\(index)") == "w\(index)")
        }
    }

    @Test("CacheChange(encoded:) rejects short, unknown-kind and malformed bytes")
    func decoderRejects() {
        func decode(_ bytes: [UInt8]) -> CacheChange? { bytes.withUnsafeBytes { CacheChange(encoded: $0) } }
        let valid = CacheChange(
            kind: .tag, origin: 0x0102_0304_0506_0708, time: 0x1112_1314_1516_1718, subject: [9, 9])
        #expect(decode(valid.encoded) == valid)
        #expect(valid.encoded.count == 19)
        for length in 0..<17 {
            #expect(decode(Array(valid.encoded.prefix(length))) == nil, "\(length) bytes")
            #expect(decode([UInt8](repeating: 1, count: length)) == nil)
        }
        for kind in [0, 4, 5, 127, 128, 255] as [UInt8] {
            var bytes = valid.encoded
            bytes[0] = kind
            #expect(decode(bytes) == nil, "kind \(kind)")
        }
        #expect(decode(CacheChange(kind: .key, origin: 1).encoded) == nil, "a key change without a key")
        #expect(decode(CacheChange(kind: .tag, origin: 1).encoded) == nil, "a tag change without a tag")
        #expect(decode(CacheChange(kind: .all, origin: 1).encoded + [0]) == nil, "removeAll with a subject")
        #expect(decode(CacheChange(kind: .all, origin: 1).encoded) == CacheChange(kind: .all, origin: 1))
        // Fields are little-endian at fixed offsets.
        #expect(Array(valid.encoded[1..<9]) == [8, 7, 6, 5, 4, 3, 2, 1])
        #expect(Array(valid.encoded[9..<17]) == [0x18, 0x17, 0x16, 0x15, 0x14, 0x13, 0x12, 0x11])
    }

    @Test("CacheChange(encoded:) on random bytes never traps, and what it accepts re-encodes to the same bytes")
    func decoderFuzz() {
        var generator = SystemRandomNumberGenerator()
        var accepted = 0
        for round in 0..<200_000 {
            let length =
                round % 3 == 0 ? Int.random(in: 0...24, using: &generator) : Int.random(in: 15...48, using: &generator)
            var bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if !bytes.isEmpty, round % 2 == 0 { bytes[0] = UInt8.random(in: 0...4, using: &generator) }
            // Decoded from an unaligned slice as well: the log hands out map memory at any offset.
            let padded = [0x55] + bytes
            let fromSlice = padded.withUnsafeBytes { CacheChange(encoded: UnsafeRawBufferPointer(rebasing: $0[1...])) }
            let decoded = bytes.withUnsafeBytes { CacheChange(encoded: $0) }
            #expect(fromSlice == decoded)
            guard let decoded else { continue }
            accepted += 1
            #expect(decoded.encoded == bytes)
            switch decoded.kind {
            case .key, .tag: #expect(!decoded.subject.isEmpty)
            case .all: #expect(decoded.subject.isEmpty)
            }
        }
        #expect(accepted > 1_000, "the generator reaches valid changes: \(accepted)")
        for _ in 0..<10_000 {
            let kind = [CacheChange.Kind.key, .tag, .all].randomElement(using: &generator)!
            let subject =
                kind == .all
                ? []
                : (0..<Int.random(in: 1...600, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
            let change = CacheChange(
                kind: kind, origin: .random(in: 0...UInt64.max, using: &generator),
                time: .random(in: 0...UInt64.max, using: &generator), subject: subject)
            #expect(change.encoded.withUnsafeBytes { CacheChange(encoded: $0) } == change)
        }
    }
}
