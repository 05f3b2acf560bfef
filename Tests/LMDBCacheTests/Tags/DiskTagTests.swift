import Foundation
import Synchronization
import Testing

@testable import LMDBCache

/// Tags in the disk tier (`DiskCache.setData(_:forKey:expiresAfter:tags:)`,
/// `removeAll(taggedWith:)`): the record's tags and the `tags` index agree after every write,
/// replacement, removal, trim and expiry; a removal by tag removes exactly the entries carrying
/// the tag, committed or queued, and keeps the totals exact.
@Suite("Disk tier: tags")
struct DiskTagTests {
    static func open(
        _ dir: TemporaryDirectory, _ clock: ManualClock = ManualClock(),
        _ edit: (inout DiskCache.Configuration) -> Void = { _ in }
    ) throws -> DiskCache {
        var configuration = DiskCache.Configuration()
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        configuration.accessTimeGranularity = .zero
        edit(&configuration)
        return try DiskCache(directory: dir.url, configuration: configuration)
    }

    static func key(_ text: String) -> [UInt8] { text.cacheKeyBytes }

    /// Commits, then checks the tag index against the records and the store's own checks.
    static func expectConsistent(
        _ disk: DiskCache, _ when: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try disk.flush()
        let problems = try TagIndexAudit.problems(disk)
        #expect(problems.isEmpty, "\(when): \(problems.prefix(5))", sourceLocation: sourceLocation)
        let report = try disk.store.verify()
        #expect(report.isClean, "\(when): \(report.problems)", sourceLocation: sourceLocation)
        #expect(
            disk.totalCount == report.scanned.count && disk.totalCost == report.scanned.bytes,
            "\(when): totals \(disk.totalCount)/\(disk.totalCost), a scan finds \(report.scanned)",
            sourceLocation: sourceLocation)
    }

    /// Each committed record's cost (stored key + record bytes), by stored key, read raw.
    static func costs(_ disk: DiskCache) throws -> [[UInt8]: Int] {
        try disk.withStore { store in
            try store.env.read { txn in
                var costs: [[UInt8]: Int] = [:]
                try txn.forEach(store.db.records) { key, bytes in
                    costs[Array(key)] = key.count + bytes.count
                    return true
                }
                return costs
            }
        }
    }

    @Test("insert stores the tags; replacing replaces them (the old tag no longer removes it); removal drops them")
    func insertReplaceRemove() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        let k1 = Self.key("k1")
        let k2 = Self.key("k2")
        let k3 = Self.key("k3")
        try disk.setData([1], forKey: k1, tags: ["a", "b"])
        try disk.setData([2], forKey: k2, tags: ["b"])
        try disk.setData([3], forKey: k3)
        #expect(try disk.entry(forKey: k1, includingStale: false)?.tags.tags == ["a", "b"], "queued, with its tags")
        try disk.flush()
        #expect(try disk.entry(forKey: k1, includingStale: false)?.tags.tags == ["a", "b"], "committed")
        #expect(try disk.entry(forKey: k3, includingStale: false)?.tags == EntryTags.none)
        #expect(Set(try disk.storedKeys(taggedWith: "a")) == [k1])
        #expect(Set(try disk.storedKeys(taggedWith: "b")) == [k1, k2])
        try Self.expectConsistent(disk, "after the first writes")

        try disk.setData([10], forKey: k1, tags: ["c"])
        #expect(try disk.removeAll(taggedWith: "a") == 0, "the replacement does not carry the old tag")
        #expect(try disk.data(forKey: k1) == [10])
        #expect(try disk.removeAll(taggedWith: "b") == 1, "k2 only: k1 lost tag b with its replacement")
        #expect(try disk.data(forKey: k2) == nil)
        #expect(try disk.data(forKey: k1) == [10])
        #expect(Set(try disk.storedKeys(taggedWith: "c")) == [k1])
        try Self.expectConsistent(disk, "after a tagged replacement")

        try disk.setData([11], forKey: k1)
        #expect(try disk.removeAll(taggedWith: "c") == 0, "an untagged replacement carries no tag")
        #expect(try disk.data(forKey: k1) == [11])
        try Self.expectConsistent(disk, "after an untagged replacement")

        try disk.setData([30], forKey: k3, tags: ["d"])
        try disk.flush()
        try disk.removeData(forKey: k3)
        #expect(try disk.removeAll(taggedWith: "d") == 0, "a removed entry carries nothing")
        try Self.expectConsistent(disk, "after a removal")

        // Two writes of one key in one batch: the second's tags only.
        let k5 = Self.key("k5")
        try disk.store.env.writer.sync {
            try disk.setData([50], forKey: k5, tags: ["q1", "shared"])
            try disk.setData([51], forKey: k5, tags: ["q2", "shared"])
        }
        try Self.expectConsistent(disk, "after two writes of one key in one batch")
        #expect(try disk.storedKeys(taggedWith: "q1").isEmpty)
        #expect(try disk.removeAll(taggedWith: "q1") == 0)
        #expect(try disk.data(forKey: k5) == [51])
        #expect(try disk.removeAll(taggedWith: "shared") == 1)
        #expect(try disk.data(forKey: k5) == nil)
        #expect(disk.totalCount == 1, "k1 is left")
        try Self.expectConsistent(disk, "at the end")
    }

    @Test("removeAll(taggedWith:) removes exactly the tagged entries, totals exact, across a close and reopen")
    func removesExactlyTheTagged() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        var tagsOf: [String: Set<String>] = [:]
        do {
            let disk = try Self.open(dir)
            for index in 0..<200 {
                var tags: Set<String> = []
                if index % 2 == 0 { tags.insert("even") }
                if index % 3 == 0 { tags.insert("three") }
                if index % 7 == 0 { tags.insert("seven") }
                // Raw, compressed here and compressed by the writer (deferred): every record kind.
                let value =
                    index % 4 == 0
                    ? sampleBytes(count: 100 + index, compressible: false)
                    : sampleBytes(count: 600 + 10 * index, compressible: true, seed: UInt64(index))
                try disk.setData(value, forKey: Self.key("key\(index)"), tags: tags)
                tagsOf["key\(index)"] = tags
            }
            try Self.expectConsistent(disk, "after the writes")
            disk.close()
        }
        var disk = try Self.open(dir)
        defer { disk.close() }
        var live = tagsOf
        for (round, tag) in ["three", "even", "nothing", "seven", "three"].enumerated() {
            let costs = try Self.costs(disk)
            let expected = live.filter { $0.value.contains(tag) }.map(\.key)
            let scanned = try TagIndexAudit.scannedKeys(disk, taggedWith: tag)
            #expect(scanned == Set(expected.map(Self.key)), "the records carrying \(tag) before its removal")
            #expect(Set(try disk.storedKeys(taggedWith: tag)) == scanned, "the index finds what a scan finds")
            let removed = try disk.removeAll(taggedWith: tag)
            #expect(removed == expected.count, "round \(round): \(tag)")
            for key in expected { live[key] = nil }
            #expect(disk.totalCount == live.count, "round \(round)")
            let remainingCost = live.keys.reduce(0) { $0 + (costs[Self.key($1)] ?? -1_000_000) }
            #expect(disk.totalCost == remainingCost, "round \(round): the removed entries' bytes exactly")
            for index in 0..<200 {
                let name = "key\(index)"
                #expect(try disk.containsData(forKey: Self.key(name)) == (live[name] != nil), "\(name)")
            }
            try Self.expectConsistent(disk, "round \(round), \(tag)")
            disk.close()
            disk = try Self.open(dir)
        }
        #expect(live.count == (0..<200).filter { $0 % 2 != 0 && $0 % 3 != 0 && $0 % 7 != 0 }.count)
        #expect(live.values.allSatisfy { $0.isEmpty })
    }

    @Test("writes still queued are committed and removed too; a queued removal or untagged replacement is honoured")
    func queuedEntries() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        try disk.setData([1], forKey: Self.key("committed-t"), tags: ["t"])
        try disk.setData([2], forKey: Self.key("removed-later"), tags: ["t"])
        try disk.setData([3], forKey: Self.key("untagged-later"), tags: ["t"])
        try disk.flush()
        // The writer is held: every write below stays queued until removeAll(taggedWith:) runs.
        let removed = try disk.store.env.writer.sync { () -> Int in
            for index in 0..<10 {
                try disk.setData([UInt8(index)], forKey: Self.key("q\(index)"), tags: index % 2 == 0 ? ["t"] : ["u"])
            }
            // Left to the writer to deflate, and built by synchronous encoding (large).
            try disk.setData(
                sampleBytes(count: 4_000, compressible: true), forKey: Self.key("deferred"), tags: ["t", "u"])
            try disk.setData(
                sampleBytes(count: 200_000, compressible: true), forKey: Self.key("large"), tags: ["t"])
            try disk.removeData(forKey: Self.key("removed-later"))
            try disk.setData([33], forKey: Self.key("untagged-later"))
            #expect(disk.totalCount == 3, "nothing above is committed yet")
            #expect(try disk.data(forKey: Self.key("q0")) == [0], "read from the queue")
            return try disk.removeAll(taggedWith: "t")
        }
        #expect(removed == 1 + 5 + 2, "committed-t, q0, q2, q4, q6, q8, deferred, large")
        for index in 0..<10 {
            #expect(try disk.data(forKey: Self.key("q\(index)")) == (index % 2 == 0 ? nil : [UInt8(index)]))
        }
        #expect(try disk.data(forKey: Self.key("deferred")) == nil)
        #expect(try disk.data(forKey: Self.key("large")) == nil)
        #expect(try disk.data(forKey: Self.key("committed-t")) == nil)
        #expect(try disk.data(forKey: Self.key("untagged-later")) == [33])
        #expect(try disk.data(forKey: Self.key("removed-later")) == nil)
        #expect(disk.totalCount == 6, "q1, q3, q5, q7, q9, untagged-later")
        try Self.expectConsistent(disk, "after removing queued entries")
    }

    /// After a trim: the index holds nothing for a record that is gone, a removal by each tag
    /// returns the live entries carrying it, and the store verifies.
    static func expectTrimmed(
        _ disk: DiskCache, tagsOf: [String: Set<String>], _ when: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        try expectConsistent(disk, when, sourceLocation: sourceLocation)
        var live: [String: Set<String>] = [:]
        for (name, tags) in tagsOf where try disk.containsData(forKey: key(name)) { live[name] = tags }
        #expect(disk.totalCount == live.count, "\(when): every record left is live", sourceLocation: sourceLocation)
        let allTags = Set(tagsOf.values.flatMap { $0 })
        for tag in allTags.sorted() {
            let expected = live.filter { $0.value.contains(tag) }.map(\.key)
            #expect(
                Set(try disk.storedKeys(taggedWith: tag)) == Set(expected.map(key)), "\(when): keys tagged \(tag)",
                sourceLocation: sourceLocation)
            #expect(
                try disk.removeAll(taggedWith: tag) == expected.count, "\(when): removeAll(taggedWith: \(tag))",
                sourceLocation: sourceLocation)
            for name in expected { live[name] = nil }
        }
        #expect(disk.totalCount == live.count, "\(when): only the untagged are left", sourceLocation: sourceLocation)
        try expectConsistent(disk, "\(when), after the removals", sourceLocation: sourceLocation)
    }

    /// Writes 60 entries one clock second apart, tagged by their index; a third expire after 30 s.
    static func populate(_ disk: DiskCache, _ clock: ManualClock) throws -> [String: Set<String>] {
        var tagsOf: [String: Set<String>] = [:]
        for index in 0..<60 {
            var tags: Set<String> = []
            if index % 2 == 0 { tags.insert("even") }
            if index % 5 == 0 { tags.insert("five") }
            if index % 3 == 1 { tags.insert("expiring") }
            let name = "e\(index)"
            try disk.setData(
                sampleBytes(count: 50 + index * 37, compressible: index % 2 == 1, seed: UInt64(index)),
                forKey: key(name), expiresAfter: index % 3 == 1 ? .seconds(30) : nil, tags: tags)
            tagsOf[name] = tags
            clock.advance(by: .seconds(1))
        }
        try disk.flush()
        return tagsOf
    }

    @Test("after removeExpired, trim(toCount:), trim(toCost:), trim(toAge:) and a trim pass, the index agrees")
    func trimsKeepTheIndex() throws {
        let plans: [(String, (DiskCache, ManualClock) throws -> Void)] = [
            (
                "removeExpired",
                { disk, clock in
                    clock.advance(by: .seconds(60))
                    try disk.removeExpired()
                }
            ),
            ("trim(toCount: 20)", { disk, _ in try disk.trim(toCount: 20) }),
            ("trim(toCost: a third)", { disk, _ in try disk.trim(toCost: disk.totalCost / 3) }),
            (
                "trim(toAge: 25 s)",
                { disk, clock in
                    clock.advance(by: .seconds(5))
                    try disk.trim(toAge: .seconds(25))
                }
            ),
            ("trim(toCount: 0)", { disk, _ in try disk.trim(toCount: 0) }),
            (
                "a trim pass",
                { disk, clock in
                    clock.advance(by: .seconds(20))
                    disk.trimPass()
                }
            ),
        ]
        for (name, plan) in plans {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let clock = ManualClock()
            // An age limit for the trim pass; no limit enforced on write (see limitsOnWrite).
            let disk = try Self.open(dir, clock) { $0.ageLimit = .seconds(50) }
            defer { disk.close() }
            let tagsOf = try Self.populate(disk, clock)
            // Reads move some in the access order.
            for index in stride(from: 0, to: 60, by: 7) { _ = try disk.data(forKey: Self.key("e\(index)")) }
            try plan(disk, clock)
            #expect(disk.totalCount < 60, "\(name) removed something")
            try Self.expectTrimmed(disk, tagsOf: tagsOf, name)
        }
    }

    @Test("the count and cost limits enforced on write keep the index in step")
    func limitsOnWrite() throws {
        for limit in ["count", "cost"] {
            let dir = TemporaryDirectory()
            defer { dir.remove() }
            let clock = ManualClock()
            let disk = try Self.open(dir, clock) {
                if limit == "count" { $0.countLimit = 25 } else { $0.costLimit = 30_000 }
                $0.lowWaterMark = 0.6
            }
            defer { disk.close() }
            var tagsOf: [String: Set<String>] = [:]
            for round in 0..<8 {
                for index in 0..<20 {
                    let name = "r\(round)-\(index)"
                    let tags: Set<String> = index % 2 == 0 ? ["even", "round\(round)"] : ["round\(round)"]
                    try disk.setData(
                        sampleBytes(count: 500 + index, compressible: false, seed: UInt64(round * 100 + index)),
                        forKey: Self.key(name), tags: tags)
                    tagsOf[name] = tags
                    clock.advance(by: .milliseconds(10))
                }
                try disk.flush()
                try Self.expectConsistent(disk, "\(limit) limit, round \(round)")
            }
            #expect(disk.totalCount < 160, "the \(limit) limit evicted")
            try Self.expectTrimmed(disk, tagsOf: tagsOf, "the \(limit) limit on write")
        }
    }

    @Test("expired entries not yet trimmed: a removal by tag leaves neither them nor their index entries")
    func expiredUntrimmed() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let clock = ManualClock()
        let disk = try Self.open(dir, clock)
        defer { disk.close() }
        try disk.setData([1], forKey: Self.key("short"), expiresAfter: .seconds(10), tags: ["t"])
        try disk.setData([2], forKey: Self.key("long"), expiresAfter: .seconds(100), tags: ["t"])
        try disk.setData([3], forKey: Self.key("forever"), tags: ["t"])
        try disk.flush()
        clock.advance(by: .seconds(20))
        #expect(try disk.data(forKey: Self.key("short")) == nil)
        #expect(disk.totalCount == 3, "expired, not trimmed")
        let removed = try disk.removeAll(taggedWith: "t")
        #expect((2...3).contains(removed), "the two live entries, and perhaps the expired one: \(removed)")
        #expect(disk.totalCount == 0)
        try Self.expectConsistent(disk, "after removing the tag")
    }

    @Test("keys longer than 503 bytes (stored under a digest) carry tags; 503 bytes exactly too")
    func longKeys() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        let long = String(repeating: "p", count: 600)
        let edge = String(repeating: "q", count: StorageKey.directLimit)
        let justOver = String(repeating: "q", count: StorageKey.directLimit + 1)
        let names = [long + "1", long + "2", long + "3", edge, justOver, "short"]
        let tags: [Set<String>] = [["L"], ["M"], ["L", "M"], ["L", String(repeating: "t", count: 255)], ["L"], ["L"]]
        for (name, tags) in zip(names, tags) {
            try disk.setData(Array(name.utf8.suffix(3)), forKey: Self.key(name), tags: tags)
        }
        try Self.expectConsistent(disk, "after the writes")
        #expect(try disk.storedKeys(taggedWith: "L").count == 5)
        #expect(
            Set(try disk.storedKeys(taggedWith: String(repeating: "t", count: 255))) == [Self.key(edge)],
            "a 511-byte index key: 8 bytes of tag, 503 of key")
        let removedKeys = Mutex<[[UInt8]]>([])
        let token = disk.observeEvictions { batch in removedKeys.withLock { $0 += batch.map(\.key) } }
        defer { disk.stopObservingEvictions(token) }
        #expect(try disk.removeAll(taggedWith: "L") == 5)
        disk.waitForEvictionEvents()
        #expect(
            Set(removedKeys.withLock { $0 }) == Set([long + "1", long + "3", edge, justOver, "short"].map(Self.key)),
            "observers hear the full keys")
        #expect(try disk.data(forKey: Self.key(long + "2")) == Array((long + "2").utf8.suffix(3)))
        #expect(try disk.containsData(forKey: Self.key(long + "2")))
        #expect(try !disk.containsData(forKey: Self.key(long + "1")))
        #expect(try !disk.containsData(forKey: Self.key(justOver)))
        #expect(try disk.removeAll(taggedWith: "M") == 1)
        #expect(disk.totalCount == 0)
        try Self.expectConsistent(disk, "at the end")
    }

    @Test("canonically equal tags are one tag: stored once, and either spelling removes the entry")
    func nfcEquivalentTags() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        try disk.setData([1], forKey: Self.key("composed"), tags: ["caf\u{E9}"])
        try disk.setData([2], forKey: Self.key("decomposed"), tags: ["cafe\u{301}"])
        try disk.setData([3], forKey: Self.key("both"), tags: ["caf\u{E9}", "cafe\u{301}", "\u{212B}", "A\u{30A}"])
        try disk.setData([4], forKey: Self.key("angstrom"), tags: ["\u{212B}"])
        try disk.flush()
        #expect(try disk.entry(forKey: Self.key("both"), includingStale: false)?.tags.bytes.count == 2)
        #expect(try disk.storedKeys(taggedWith: "caf\u{E9}").count == 3)
        #expect(try disk.removeAll(taggedWith: "cafe\u{301}") == 3)
        #expect(try disk.removeAll(taggedWith: "\u{C5}") == 1, "U+212B is U+00C5 in NFC")
        #expect(disk.totalCount == 0)
        try Self.expectConsistent(disk, "at the end")
    }

    @Test("32 tags are accepted; 33, an empty tag or one past 255 NFC bytes throw invalidTag and write nothing")
    func tagLimits() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        let key = Self.key("k")
        let thirtyTwo = Set((0..<32).map { "tag\($0)" })
        try disk.setData([1], forKey: key, tags: thirtyTwo)
        try disk.flush()
        #expect(try disk.entry(forKey: key, includingStale: false)?.tags.tags.count == 32)
        // Canonically equal spellings count once: 33 strings, 32 tags.
        try disk.setData(
            [2], forKey: Self.key("k2"), tags: Set((0..<31).map { "tag\($0)" } + ["caf\u{E9}", "cafe\u{301}"]))
        try disk.flush()
        #expect(try disk.entry(forKey: Self.key("k2"), includingStale: false)?.tags.tags.count == 32)

        let invalid: [(String, Set<String>)] = [
            ("33 tags", thirtyTwo.union(["tag32"])),
            ("an empty tag", ["ok", ""]),
            ("256 bytes", [String(repeating: "x", count: 256)]),
            ("129 two-byte characters (258 bytes)", [String(repeating: "\u{E9}", count: 129)]),
            // U+0958 is excluded from composition: its NFC form is two scalars, 6 bytes for 3.
            ("85 × U+0958: 255 bytes as given, 510 in NFC", [String(repeating: "\u{0958}", count: 85)]),
        ]
        for (name, tags) in invalid {
            let before = try disk.store.changeHead()
            #expect(throws: CacheError.self, "\(name)") {
                try disk.setData([9], forKey: key, tags: tags)
            }
            do {
                try disk.setData([9], forKey: key, tags: tags)
            } catch let error as CacheError {
                guard case .invalidTag = error else {
                    Issue.record("\(name): threw \(error), not invalidTag")
                    continue
                }
            }
            try disk.flush()
            #expect(try disk.data(forKey: key) == [1], "\(name): nothing written, the old value stays")
            #expect(try disk.entry(forKey: key, includingStale: false)?.tags.tags.count == 32, "\(name)")
            #expect(try disk.store.changeHead() == before, "\(name): nothing logged")
        }
        // The largest valid tags: 255 bytes, in NFC.
        let valid: [(String, String)] = [
            ("255 bytes", String(repeating: "y", count: 255)),
            ("127 × e+U+0301: 381 bytes as given, 254 in NFC", String(repeating: "e\u{301}", count: 127)),
            ("85 × €: 255 bytes", String(repeating: "\u{20AC}", count: 85)),
        ]
        for (name, tag) in valid {
            try disk.setData([5], forKey: Self.key(name), tags: [tag])
            try disk.flush()
            #expect(try disk.storedKeys(taggedWith: tag) == [Self.key(name)], "\(name)")
        }
        for tag in ["", String(repeating: "x", count: 256)] {
            #expect(throws: CacheError.self) { try disk.removeAll(taggedWith: tag) }
        }
        try Self.expectConsistent(disk, "at the end")
    }

    @Test("removing 10,000 tagged entries among 20,000 takes several bounded transactions and leaves the rest")
    func largeRemoval() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        for index in 0..<20_000 {
            let tags: Set<String> = index % 2 == 0 ? ["even", "group\(index % 7)"] : ["odd"]
            try disk.setData(
                withUnsafeBytes(of: UInt64(index).littleEndian, Array.init), forKey: Self.key("n\(index)"), tags: tags)
        }
        try disk.flush()
        #expect(disk.totalCount == 20_000)
        let batches = Mutex<[[DiskEviction]]>([])
        let token = disk.observeEvictions { batch in batches.withLock { $0.append(batch) } }
        defer { disk.stopObservingEvictions(token) }
        let head = try disk.store.changeHead()
        #expect(try disk.removeAll(taggedWith: "even") == 10_000)
        disk.waitForEvictionEvents()
        let seen = batches.withLock { $0 }
        let batchSize = DiskStore.tagRemovalBatchSize
        #expect(seen.allSatisfy { $0.count <= batchSize }, "batch sizes \(seen.map(\.count))")
        #expect(seen.count >= (10_000 + batchSize - 1) / batchSize && seen.count > 1, "\(seen.count) transactions")
        #expect(seen.reduce(0) { $0 + $1.count } == 10_000)
        #expect(seen.allSatisfy { $0.allSatisfy { $0.reason == .explicit } })
        let removedKeys = Set(seen.flatMap { $0.map(\.key) })
        #expect(removedKeys == Set(stride(from: 0, to: 20_000, by: 2).map { Self.key("n\($0)") }))
        #expect(try disk.store.changeHead() > head, "the removal is logged")
        #expect(disk.totalCount == 10_000)
        for index in stride(from: 1, to: 20_000, by: 2) {
            #expect(
                try disk.data(forKey: Self.key("n\(index)"))
                    == withUnsafeBytes(of: UInt64(index).littleEndian, Array.init))
        }
        #expect(try disk.removeAll(taggedWith: "group3") == 0, "the other tags of the removed entries went with them")
        try Self.expectConsistent(disk, "after the removal")
        #expect(try disk.removeAll(taggedWith: "odd") == 10_000)
        #expect(disk.totalCount == 0 && disk.totalCost == 0)
        #expect(try TagIndexAudit.rawEntries(disk).isEmpty)
    }

    @Test("an index entry under a tag's prefix that points at an entry without the tag never removes that entry")
    func forgedPrefixCollision() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        let x = try EntryTags.storedBytes(of: "x")
        try disk.setData([1], forKey: Self.key("has-x"), tags: ["x"])
        try disk.setData([2], forKey: Self.key("has-y"), tags: ["y"])
        try disk.setData([3], forKey: Self.key("untagged"))
        let long = String(repeating: "l", count: 700)
        try disk.setData([4], forKey: Self.key(long), tags: ["z"])
        try disk.flush()
        // As if "y", the untagged entry's (absent) tags and "z" shared x's 8-byte prefix.
        for name in ["has-y", "untagged", long, "ghost"] {
            let stored = try StorageKey(Self.key(name)).bytes
            try TagIndexAudit.forge(disk, .init(prefix: EntryTags.indexPrefix(x), key: stored))
        }
        #expect(try disk.storedKeys(taggedWith: "x") == [Self.key("has-x")], "only the record that carries x")
        #expect(try disk.removeAll(taggedWith: "x") == 1)
        #expect(try disk.data(forKey: Self.key("has-x")) == nil)
        #expect(try disk.data(forKey: Self.key("has-y")) == [2])
        #expect(try disk.data(forKey: Self.key("untagged")) == [3])
        #expect(try disk.data(forKey: Self.key(long)) == [4])
        #expect(try disk.data(forKey: Self.key("ghost")) == nil)
        #expect(disk.totalCount == 3)
        let report = try disk.store.verify()
        #expect(report.damaged.isEmpty && report.indexProblems.isEmpty && report.scanned == report.recorded)
        // The forged entries are left to their records (or dropped): none names a missing record.
        let orphaned = try TagIndexAudit.rawEntries(disk).filter { entry in
            (try? disk.withStore { store in try store.env.read { try $0.get(store.db.records, entry.key) != nil } })
                != true
        }
        #expect(orphaned.isEmpty, "index entries of missing records: \(orphaned)")
        // The true tags still work.
        #expect(try disk.removeAll(taggedWith: "y") == 1)
        #expect(try disk.removeAll(taggedWith: "z") == 1)
        #expect(try disk.removeAll(taggedWith: "x") == 0)
        #expect(disk.totalCount == 1)
    }

    @Test("an index entry that points at a damaged record is skipped, not a crash and not a removal")
    func forgedDamagedRecord() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        try disk.setData([1], forKey: Self.key("good"), tags: ["x"])
        try disk.setData([2], forKey: Self.key("damaged"), tags: ["x"])
        try disk.flush()
        let damagedKey = Self.key("damaged")
        var record = try #require(
            try disk.withStore { store in
                try store.env.read { try $0.get(store.db.records, damagedKey).map(Array.init) }
            })
        record[record.count - 1] ^= 0xFF
        try TagIndexAudit.forgeRecord(disk, key: damagedKey, bytes: record)
        try TagIndexAudit.forgeRecord(disk, key: Self.key("garbage"), bytes: [4, 4, 4])
        try TagIndexAudit.forge(
            disk, .init(prefix: EntryTags.indexPrefix(try EntryTags.storedBytes(of: "x")), key: Self.key("garbage")))
        let removed = try disk.removeAll(taggedWith: "x")
        #expect(removed == 1, "the good entry only")
        #expect(try disk.data(forKey: Self.key("good")) == nil)
        #expect(try disk.data(forKey: damagedKey) == nil, "a damaged record is a miss")
    }

    @Test("compaction keeps the tags, their index and the change log's head")
    func compactionKeepsTags() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir)
        defer { disk.close() }
        for index in 0..<300 {
            try disk.setData(
                sampleBytes(count: 2_000, compressible: false, seed: UInt64(index)), forKey: Self.key("c\(index)"),
                tags: index % 3 == 0 ? ["three"] : ["other"])
        }
        try disk.flush()
        #expect(try disk.removeAll(taggedWith: "other") == 200)
        let head = try disk.store.changeHead()
        try disk.compact()
        #expect(try disk.store.changeHead() == head, "followers' positions stay meaningful")
        try Self.expectConsistent(disk, "after compaction")
        #expect(try disk.storedKeys(taggedWith: "three").count == 100)
        #expect(try disk.removeAll(taggedWith: "three") == 100)
        #expect(disk.totalCount == 0)
        try Self.expectConsistent(disk, "after removing the rest")
    }

    @Test("the cost limit counts the tags section: tags can make a record too large")
    func costLimitCountsTags() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let disk = try Self.open(dir) { $0.costLimit = 1_000 }
        defer { disk.close() }
        let value = sampleBytes(count: 900, compressible: false)
        let bigTag = String(repeating: "t", count: 255)
        try disk.setData(value, forKey: Self.key("k"), tags: ["small"])
        #expect(throws: CacheError.valueTooLarge(size: 1 + 32 + 1 + 256 + 900, limit: 1_000)) {
            try disk.setData(value, forKey: Self.key("k"), tags: [bigTag])
        }
        try disk.flush()
        #expect(try disk.data(forKey: Self.key("k")) == value, "the refused write left the old value")
        #expect(try disk.storedKeys(taggedWith: "small") == [Self.key("k")])
        #expect(disk.totalCost == 1 + 32 + 1 + 6 + 900, "key, header, count byte, one 5-byte tag and its length, value")
        try Self.expectConsistent(disk, "at the end")
    }
}
