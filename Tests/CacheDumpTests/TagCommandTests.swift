import CacheDump
import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

/// cache-dump and tags, run as a real process against caches the library wrote: `list --tag`,
/// `rm --tag`, `put --tag`, and `verify` (with `--repair`) of the tag index and the change log.
@Suite("cache-dump and tags: list, rm and put by tag; verify and repair of the tag index and the change log")
struct TagCommandTests {
    /// A key past the direct limit: stored under a digest, its full key in the record.
    static let longKey = String(repeating: "L", count: 600)

    /// What ``tagged(_:)`` writes: key → tags. a0…a4 carry `feed` (a1 and a3 `author:42` too),
    /// plain0…plain4 nothing, the long key `feed` and `long`, `café` the tag `café` (NFC).
    static let layout: [String: Set<String>] = {
        var layout: [String: Set<String>] = [:]
        for index in 0..<5 {
            layout["a\(index)"] = index % 2 == 1 ? ["feed", "author:42"] : ["feed"]
            layout["plain\(index)"] = []
        }
        layout[longKey] = ["feed", "long"]
        layout["café"] = ["caf\u{E9}"]
        return layout
    }()

    /// Index entries ``layout`` calls for: one per tag of each entry.
    static let indexEntries = layout.values.map(\.count).reduce(0, +)

    /// A cache holding ``layout`` (each value the key's UTF-8), flushed and closed.
    static func tagged(_ label: String = #function) throws -> SampleCache {
        let cache = try SampleCache(count: 0, label: label)
        let disk = try cache.open()
        defer { disk.close() }
        for (key, tags) in layout {
            if tags.isEmpty {
                try disk.setData(Array(key.utf8), forKey: key)
            } else {
                try disk.setData(Array(key.utf8), forKey: Array(key.utf8), tags: tags)
            }
        }
        try disk.flush()
        return cache
    }

    /// The keys `list` prints (the first column of each row), in order.
    static func listedKeys(_ arguments: [String]) throws -> [String] {
        let run = try CacheDumpRun(["list"] + arguments)
        #expect(run.status == 0, "\(arguments): \(run.errorText)")
        #expect(run.lines.first?.hasPrefix("KEY ") == true)
        return run.lines.dropFirst().map { String($0.split(separator: " ")[0]) }
    }

    /// The stored keys of the tag index's entries under `tag`, read raw.
    static func rawIndexKeys(_ cache: SampleCache, tag: String) throws -> [[UInt8]] {
        let prefix = EntryTags.indexPrefix(Array(tag.utf8))
        let disk = try cache.open()
        defer { disk.close() }
        return try disk.store.env.read { txn in
            var keys: [[UInt8]] = []
            try txn.forEach(disk.store.db.tags, from: prefix) { key, _ in
                guard key.starts(with: prefix) else { return false }
                keys.append(Array(key.dropFirst(prefix.count)))
                return true
            }
            return keys
        }
    }

    @Test("list --tag shows exactly the entries carrying the tag, through the index; every row shows its tags")
    func listByTag() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        let feed = Self.layout.filter { $0.value.contains("feed") }.keys.sorted {
            Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8))
        }
        #expect(try Self.listedKeys([cache.path, "--tag", "feed"]) == feed)
        #expect(try Self.listedKeys([cache.path, "--tag", "author:42"]) == ["a1", "a3"])
        #expect(try Self.listedKeys([cache.path, "--tag", "long"]) == [Self.longKey], "the full key of a long key")
        #expect(
            try Self.listedKeys([cache.path, "--tag", "nobody"]) == [], "a tag no entry carries: no rows, status 0")
        #expect(
            try Self.listedKeys([cache.path, "--tag", "cafe\u{301}"]) == ["café"], "the tag in NFD finds it in NFC")
        #expect(try Self.listedKeys([cache.path, "--tag", "feed", "--prefix", "a", "--limit", "2"]) == ["a0", "a1"])
        #expect(try Self.listedKeys([cache.path, "--tag", "feed", "--sort", "size", "--limit", "1"]) == [Self.longKey])

        let all = try CacheDumpRun(["list", cache.path])
        #expect(all.lines.first?.split(separator: " ").last == "TAGS")
        func tagsCell(_ key: String) throws -> Substring? {
            try #require(all.lines.first { $0.hasPrefix(key + " ") }).split(separator: " ").last
        }
        #expect(try tagsCell("a1") == "author:42,feed", "sorted by their bytes, comma-separated")
        #expect(try tagsCell("a0") == "feed")
        #expect(try tagsCell("plain0") == "-")

        let json = try #require(
            try CacheDumpRun(["list", cache.path, "--tag", "author:42", "--json"]).json() as? [[String: Any]])
        #expect(json.map { $0["key"] as? String } == ["a1", "a3"])
        #expect(json.allSatisfy { $0["tags"] as? [String] == ["author:42", "feed"] })
        let untagged = try #require(
            try CacheDumpRun(["list", cache.path, "--prefix", "plain", "--json"]).json() as? [[String: Any]])
        #expect(untagged.count == 5 && untagged.allSatisfy { ($0["tags"] as? [String])?.isEmpty == true })

        // The index, not a scan, names the entries: an entry whose index entry is gone is not listed.
        try cache.tamper { store, txn in
            try txn.delete(store.db.tags, DiskDatabases.tagIndexKey(tag: Array("feed".utf8), key: Array("a2".utf8)))
        }
        #expect(try Self.listedKeys([cache.path, "--tag", "feed"]) == feed.filter { $0 != "a2" })
    }

    @Test("rm --tag removes every entry carrying the tag; another process and a cache's memory tier agree")
    func removeByTag() throws {
        let cache = try SampleCache(count: 0)
        defer { cache.remove() }
        var configuration = Cache<String, String>.Configuration()
        configuration.memory.automaticTrimming = false
        configuration.disk.automaticTrimming = false
        // Polled by the test alone (followChanges()).
        configuration.coherence = .init(pollInterval: .seconds(3_600))
        let service = try Cache<String, String>(directory: cache.directory.url, configuration: configuration)
        defer { service.close() }
        service.insert("one", forKey: "t1", tags: ["feed"])
        service.insert("two", forKey: "t2", tags: ["feed", "other"])
        service.insert("long", forKey: Self.longKey, tags: ["feed"])
        service.insert("kept", forKey: "kept", tags: ["other"])
        service.insert("plain", forKey: "plain")
        try service.flush()
        #expect(service.memory.value(forKey: "t1") == "one", "in the memory tier before the removal")

        let run = try CacheDumpRun(["rm", cache.path, "--tag", "feed"])
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.text == "removed 3 entries tagged feed\n")
        #expect(run.errorText == "")

        // Another process's view: cache-dump's and the test helper's.
        #expect(try Self.listedKeys([cache.path]) == ["kept", "plain"])
        for key in ["t1", "t2", Self.longKey] {
            let reader = try HelperProcess(["read", cache.path, key])
            #expect(reader.readLine() == "missing", "\(key.prefix(8))")
            #expect(reader.wait() == 0)
        }
        let reader = try HelperProcess(["read", cache.path, "kept"])
        #expect(reader.readLine() == "kept", "the string codec stores its UTF-8")
        #expect(reader.wait() == 0)

        // This process's cache follows the change log and drops the tag's entries from memory.
        #expect(service.memory.value(forKey: "t1") == "one", "not followed yet")
        service.followChanges()
        #expect(service.memory.value(forKey: "t1") == nil && service.memory.value(forKey: "t2") == nil)
        #expect(service.value(forKey: "t1") == nil && service.value(forKey: "t2") == nil)
        #expect(service.value(forKey: Self.longKey) == nil)
        #expect(service.value(forKey: "kept") == "kept" && service.value(forKey: "plain") == "plain")
        #expect(service.statistics.invalidationsApplied >= 1)

        let again = try CacheDumpRun(["rm", cache.path, "--tag", "feed"])
        #expect(again.status == 2, "no entry carries it any more")
        #expect(again.text == "removed 0 entries tagged feed\n")
        #expect(again.errorText == "cache-dump: no entry tagged feed\n")

        let both = try CacheDumpRun(["rm", cache.path, "plain", "--tag", "other"])
        #expect(both.status == 0, "\(both.errorText)")
        #expect(both.text == "removed 1 of 1 entry\nremoved 1 entry tagged other\n")
        #expect(try Self.listedKeys([cache.path]) == [])
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == 0 && disk.totalCost == 0)
        #expect(try disk.store.verify().isClean)
    }

    @Test("put --tag (repeatable) stores the tags; list and the library see them")
    func putWithTags() throws {
        let cache = try SampleCache(count: 0)
        defer { cache.remove() }
        let run = try CacheDumpRun(
            ["put", cache.path, "k", "--tag", "x", "--tag", "y z", "--tag", "x"], input: [1, 2])
        #expect(run.status == 0, "\(run.errorText)")
        #expect(run.text == "stored 2 bytes under k\n")
        // 100 × "é" in NFD is 300 bytes, in NFC 200: tags are measured as stored, in NFC.
        let decomposed = String(repeating: "e\u{301}", count: 100)
        #expect(try CacheDumpRun(["put", cache.path, "nfd", "--tag", decomposed], input: [3]).status == 0)
        #expect(try CacheDumpRun(["put", cache.path, "max", "--tag", String(repeating: "m", count: 255)]).status == 0)

        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.storedEntry(forKey: Array("k".utf8))?.tags == ["x", "y z"])
        #expect(try disk.storedEntry(forKey: Array("nfd".utf8))?.tags == [String(repeating: "\u{E9}", count: 100)])
        #expect(try disk.storedKeys(taggedWith: "y z") == [Array("k".utf8)])
        let json = try #require(try CacheDumpRun(["list", cache.path, "--json"]).json() as? [[String: Any]])
        #expect(json.first { $0["key"] as? String == "k" }?["tags"] as? [String] == ["x", "y z"])
        #expect(try CacheDumpRun(["verify", cache.path]).status == 0)
    }

    @Test("an invalid tag (empty, 256 bytes, 33 of them) is refused with status 7 and a clear message; nothing changes")
    func invalidTags() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        let tooLong = String(repeating: "x", count: 256)
        let cases: [([String], String)] = [
            (["put", cache.path, "new", "--tag", ""], "invalid tag: a tag must not be empty"),
            (
                ["put", cache.path, "new", "--tag", tooLong],
                "invalid tag: a tag holds at most 255 UTF-8 bytes; this one has 256"
            ),
            (
                ["put", cache.path, "new", "--tag", String(repeating: "\u{E9}", count: 128)],
                "at most 255 UTF-8 bytes; this one has 256"
            ),
            (
                ["put", cache.path, "new"] + (0..<33).flatMap { ["--tag", "t\($0)"] },
                "invalid tag: an entry carries at most 32 tags"
            ),
            (["list", cache.path, "--tag", ""], "invalid tag: a tag must not be empty"),
            (["list", cache.path, "--tag", tooLong], "this one has 256"),
            (["rm", cache.path, "--tag", ""], "invalid tag: a tag must not be empty"),
            (["rm", cache.path, "a0", "--tag", "feed", "--tag", tooLong], "this one has 256"),
        ]
        for (arguments, message) in cases {
            let run = try CacheDumpRun(arguments, input: [1])
            run.expectFailure(7, mentioning: message)
            #expect(run.output.isEmpty, "\(arguments.prefix(3)): \(run.text)")
        }
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == Self.layout.count, "nothing stored or removed")
        #expect(try disk.storedEntry(forKey: Array("new".utf8)) == nil)
        #expect(try disk.storedKeys(taggedWith: "feed").count == 6)
    }

    @Test("tags with escape sequences, bidirectional controls, commas and backslashes are printed escaped")
    func escapedTags() throws {
        let cache = try SampleCache(count: 0)
        defer { cache.remove() }
        let hostile: Set<String> = [
            "\u{1B}[31mred\u{1B}[0m", "\u{1B}]0;title\u{07}", "bidi\u{202E}fdp", "a,b", #"back\slash"#,
        ]
        do {
            let disk = try cache.open()
            defer { disk.close() }
            try disk.setData([1], forKey: Array("k".utf8), tags: hostile)
            try disk.flush()
        }
        let text = try CacheDumpRun(["list", cache.path])
        #expect(text.status == 0, "\(text.errorText)")
        TerminalEscapeTests.expectNothingRaw(text.output)
        let row = try #require(text.lines.first { $0.hasPrefix("k ") })
        let cell = try #require(row.split(separator: " ").last)
        #expect(
            Set(cell.split(separator: ",").map(String.init)) == [
                #"\x1b[31mred\x1b[0m"#, #"\x1b]0;title\x07"#, #"bidi\u{202E}fdp"#, #"a\x2cb"#, #"back\x5cslash"#,
            ], "\(cell)")

        let json = try CacheDumpRun(["list", cache.path, "--json"])
        TerminalEscapeTests.expectNothingRaw(json.output)
        let tags = try #require((try json.json() as? [[String: Any]])?.first?["tags"] as? [String])
        #expect(
            Set(tags) == [#"\x1b[31mred\x1b[0m"#, #"\x1b]0;title\x07"#, #"bidi\u{202E}fdp"#, "a,b", #"back\x5cslash"#])

        #expect(try Self.listedKeys([cache.path, "--tag", "\u{1B}[31mred\u{1B}[0m"]) == ["k"])
        let missing = try CacheDumpRun(["rm", cache.path, "--tag", "bidi\u{202E}x"])
        #expect(missing.status == 2)
        #expect(missing.errorText == #"cache-dump: no entry tagged bidi\u{202E}x"# + "\n")
        #expect(missing.text == #"removed 0 entries tagged bidi\u{202E}x"# + "\n")
        let removed = try CacheDumpRun(["rm", cache.path, "--tag", "\u{1B}]0;title\u{07}"])
        #expect(removed.status == 0)
        #expect(removed.text == #"removed 1 entry tagged \x1b]0;title\x07"# + "\n")
        TerminalEscapeTests.expectNothingRaw(removed.output)
    }

    @Test("verify passes a healthy tagged store, after overwrites and removals too")
    func verifyHealthy() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        let run = try CacheDumpRun(["verify", cache.path])
        #expect(run.status == 0, "\(run.text)")
        #expect(run.text == "\(Self.layout.count) records checked: no problems\n")
        do {
            let disk = try cache.open()
            defer { disk.close() }
            let report = try disk.verify()
            #expect(report.isClean && report.tagEntries == Self.indexEntries)
            #expect(report.changeEntries == Self.layout.count && report.changeHead == UInt64(Self.layout.count))
            // Replaced tags, an untagged overwrite, a removal by tag, a removal by key.
            try disk.setData([9], forKey: Array("a0".utf8), tags: ["fresh"])
            try disk.setData([9], forKey: "a1")
            try disk.removeData(forKey: "a3")
            #expect(try disk.removeAll(taggedWith: "long") == 1)
            try disk.flush()
        }
        #expect(try CacheDumpRun(["verify", cache.path]).status == 0)
        #expect(try Self.listedKeys([cache.path, "--tag", "author:42"]) == [])
        #expect(try Self.listedKeys([cache.path, "--tag", "fresh"]) == ["a0"])
        #expect(try Self.rawIndexKeys(cache, tag: "feed").map { String(decoding: $0, as: UTF8.self) } == ["a2", "a4"])
    }

    @Test("verify reports missing and orphaned tag index entries; --repair drops and adds them, totals untouched")
    func damagedTagIndex() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        let (count, cost) = try {
            let disk = try cache.open()
            defer { disk.close() }
            return (disk.totalCount, disk.totalCost)
        }()
        try cache.tamper { store, txn in
            // Missing: a2's entry under feed. Orphans: a tag a0 does not carry, a key with no
            // record, an index key too short to name one.
            try txn.delete(store.db.tags, DiskDatabases.tagIndexKey(tag: Array("feed".utf8), key: Array("a2".utf8)))
            try txn.put(store.db.tags, DiskDatabases.tagIndexKey(tag: Array("ghost".utf8), key: Array("a0".utf8)), [])
            try txn.put(store.db.tags, DiskDatabases.tagIndexKey(tag: Array("feed".utf8), key: Array("gone".utf8)), [])
            try txn.put(store.db.tags, [1, 2, 3], [])
        }
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("tag index lacks 1 entry of tagged records"), "\(found.text)")
        #expect(
            found.lines.contains("tag index: 3 entries name no record carrying a tag of their prefix"), "\(found.text)")
        #expect(found.lines.last == "\(Self.layout.count) records checked: 2 problems")
        #expect(!(try Self.listedKeys([cache.path, "--tag", "feed"]).contains("a2")))

        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        #expect(repaired.text.contains("tag index: dropped 3, added 1;"), "\(repaired.text)")
        #expect(repaired.text.contains("totals \(count) entries, \(OutputCount.of(cost)) bytes -> \(count) entries"))
        #expect(!repaired.text.contains("change log"), "the log was sound")
        #expect(repaired.lines.last == "\(Self.layout.count) records checked: no problems")
        #expect(try CacheDumpRun(["verify", cache.path]).text == "\(Self.layout.count) records checked: no problems\n")
        #expect(try Self.listedKeys([cache.path, "--tag", "feed"]).contains("a2"))
        #expect(try Self.rawIndexKeys(cache, tag: "ghost") == [])
        let disk = try cache.open()
        defer { disk.close() }
        #expect(disk.totalCount == count && disk.totalCost == cost)
        #expect(try disk.verify().tagEntries == Self.indexEntries)
    }

    @Test("a damaged tagged record: its index entries are orphans; --repair removes the record and drops them")
    func damagedTaggedRecord() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        try cache.tamper { store, txn in
            var bytes = Array(try #require(try txn.get(store.db.records, Array("a1".utf8))))
            bytes[bytes.count - 1] ^= 0xff
            try txn.put(store.db.records, Array("a1".utf8), bytes)
        }
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("damaged record a1: checksum mismatch"), "\(found.text)")
        #expect(
            found.lines.contains("tag index: 2 entries name no record carrying a tag of their prefix"), "\(found.text)")
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        #expect(repaired.text.contains("repaired: removed 1 damaged record and"))
        #expect(repaired.text.contains("tag index: dropped 2, added 0;"), "\(repaired.text)")
        #expect(try Self.listedKeys([cache.path, "--tag", "author:42"]) == ["a3"])
        #expect(try CacheDumpRun(["verify", cache.path]).status == 0)
    }

    @Test("--repair rebuilds a tag index larger than one repair transaction")
    func repairInBatches() throws {
        let count = DiskStore.repairBatchSize + 904
        let cache = try SampleCache(count: 0)
        defer { cache.remove() }
        do {
            let disk = try cache.open()
            defer { disk.close() }
            for index in 0..<count {
                try disk.setData([UInt8(index & 0xff)], forKey: Array("k\(index)".utf8), tags: ["bulk"])
            }
            try disk.flush()
        }
        try cache.tamper { store, txn in
            try txn.empty(store.db.tags)
            for index in 0..<count {
                try txn.put(
                    store.db.tags, DiskDatabases.tagIndexKey(tag: Array("x".utf8), key: Array("k\(index)".utf8)), [])
            }
        }
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("tag index lacks \(count) entries of tagged records"), "\(found.text)")
        #expect(
            found.lines.contains("tag index: \(count) entries name no record carrying a tag of their prefix"),
            "\(found.text)")
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        let formatted = OutputCount.of(count)
        #expect(repaired.text.contains("tag index: dropped \(formatted), added \(formatted);"), "\(repaired.text)")
        #expect(try Self.rawIndexKeys(cache, tag: "bulk").count == count)
        #expect(try Self.rawIndexKeys(cache, tag: "x") == [])
        #expect(
            try CacheDumpRun(["rm", cache.path, "--tag", "bulk"]).text == "removed \(formatted) entries tagged bulk\n")
    }

    @Test(
        "verify reports bad change log entries; --repair empties the log, keeps its head; followers drop their memory")
    func damagedChangeLog() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        var head: UInt64 = 0
        try cache.tamper { store, txn in
            head = try Totals.load(txn, store.db.info, DiskStore.changeHeadKey)
            let sound = CacheChange(kind: .key, origin: 0, time: 1, subject: Array("a0".utf8)).encoded
            try txn.put(store.db.changes, [1, 2, 3], sound)
            try txn.put(store.db.changes, DiskStore.changeKey(head - 1), [2, 0])  // a tag change with no subject
            try txn.put(store.db.changes, DiskStore.changeKey(head), [9] + sound.dropFirst())  // no such kind
            try txn.put(store.db.changes, DiskStore.changeKey(head + 5), sound)
        }
        #expect(head == UInt64(Self.layout.count))
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(found.lines.contains("change log: 1 entry has no 8-byte sequence number"), "\(found.text)")
        #expect(found.lines.contains("change log: 2 entries do not decode as a change"), "\(found.text)")
        #expect(found.lines.contains("change log: 1 entry is past its head (\(head))"), "\(found.text)")
        #expect(found.lines.last == "\(Self.layout.count) records checked: 3 problems")

        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        #expect(
            repaired.lines.contains(
                "emptied the change log (\(Self.layout.count + 2) entries); "
                    + "processes sharing the cache drop their memory tiers"),
            "\(repaired.text)")
        #expect(repaired.lines.last == "\(Self.layout.count) records checked: no problems")
        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.store.changeHead() == head, "the head is kept")
        #expect(try disk.verify().changeEntries == 0)
        // A follower behind the head finds its changes gone: it drops its memory tier.
        guard case .fellBehind(let at) = try disk.store.changes(after: head - 3, limit: 100) else {
            Issue.record("a follower behind the head must fall behind")
            return
        }
        #expect(at == head)
        // Changes go on from the head.
        try disk.setData([1], forKey: "after")
        try disk.flush()
        guard case .changes(let changes, let newHead) = try disk.store.changes(after: head, limit: 100) else {
            Issue.record("the next change follows the head")
            return
        }
        #expect(newHead == head + 1 && changes.map(\.subject) == [Array("after".utf8)])
        #expect(try disk.verify().isClean)
    }

    @Test("verify reports a change log head that is not 8 bytes; --repair empties the log and writes the head again")
    func malformedChangeHead() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        try cache.tamper { store, txn in try txn.put(store.db.info, DiskStore.changeHeadKey, [1, 2, 3]) }
        let found = try CacheDumpRun(["verify", cache.path])
        #expect(found.status == 1)
        #expect(
            found.lines.contains("change log: its head (the info value changeHead) is not 8 bytes"), "\(found.text)")
        #expect(!found.text.contains("past its head"), "entries are not judged against a head that is not one")
        #expect(found.lines.last == "\(Self.layout.count) records checked: 1 problem")
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text) \(repaired.errorText)")
        #expect(repaired.text.contains("emptied the change log (\(Self.layout.count) entries)"), "\(repaired.text)")
        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.store.changeHead() == UInt64(Self.layout.count), "the newest sequence the log held")
        #expect(try disk.verify().isClean)
    }

    @Test("verify --repair leaves a sound change log alone")
    func soundChangeLogKept() throws {
        let cache = try Self.tagged()
        defer { cache.remove() }
        let repaired = try CacheDumpRun(["verify", cache.path, "--repair"])
        #expect(repaired.status == 0, "\(repaired.text)")
        #expect(repaired.text.contains("tag index: dropped 0, added 0;"), "\(repaired.text)")
        #expect(!repaired.text.contains("change log"))
        let disk = try cache.open()
        defer { disk.close() }
        #expect(try disk.verify().changeEntries == Self.layout.count)
    }
}

/// Counts as cache-dump prints them (`12,345`).
enum OutputCount {
    static func of(_ value: Int) -> String {
        var digits = String(value)
        var index = digits.endIndex
        while digits.distance(from: digits.startIndex, to: index) > 3 {
            index = digits.index(index, offsetBy: -3)
            digits.insert(",", at: index)
        }
        return digits
    }
}
