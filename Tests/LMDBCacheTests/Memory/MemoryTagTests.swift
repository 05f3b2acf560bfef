import Foundation
import PropertyBased
import Testing

@testable import LMDBCache

/// Tags in the memory tier: stored with each entry, replaced with it, dropped from the tag index
/// by every path that removes an entry, and removed together by ``MemoryCache/removeAll(taggedWith:)``.
@Suite("Memory tier: tags")
struct MemoryTagTests {
    typealias IntCache = MemoryCache<Int, Int>

    static func cache(
        _ clock: ManualClock = ManualClock(), log: RemovalLog<Int, Int>? = nil, shards: Int = 4,
        _ edit: (inout IntCache.Configuration) -> Void = { _ in }
    ) -> IntCache {
        var configuration = IntCache.Configuration()
        configuration.shards = shards
        configuration.clock = clock.clock
        configuration.automaticTrimming = false
        edit(&configuration)
        return IntCache(configuration: configuration, removalListener: log?.listener)
    }

    /// ``ShardInvariants`` (the tag tables' included) of every shard of `cache`.
    static func problems(_ cache: IntCache) -> [String] {
        (0..<cache.shards.count).flatMap { index in
            cache.shards.withLock(at: index) { ShardInvariants.problems($0) }.map { "shard \(index): \($0)" }
        }
    }

    /// The number of tags the tag index holds, over every shard.
    static func indexedTags(_ cache: IntCache) -> Int {
        (0..<cache.shards.count).reduce(0) { total, index in
            total + cache.shards.withLock(at: index) { $0.taggedNodes.count + $0.entryTags.count }
        }
    }

    static func tags(_ tags: String...) -> EntryTags {
        try! EntryTags(tags)
    }

    @Test("a node still takes 64 bytes with a String key and an array value")
    func nodeSize() {
        #expect(MemoryLayout<MemoryShard<String, [UInt8]>.Node>.size == 64)
        #expect(MemoryLayout<MemoryShard<String, [UInt8]>.Node>.stride == 64)
    }

    @Test("the tags flag shares the state word without disturbing the moves, the list or served-until")
    func stateBits() {
        var node = MemoryShard<Int, Int>.Node(key: 1, value: 1, cost: 0, accessed: 0, expires: 0, stored: 0, tag: 0)
        node.moved = .max
        node.segment = .protected
        node.hasServedUntil = true
        #expect(!node.hasTags)
        node.hasTags = true
        #expect(node.hasTags && node.moved == MemoryShard<Int, Int>.Node.movedMask)
        #expect(node.segment == .protected && node.hasServedUntil)
        node.moved = 5
        node.segment = .probation
        node.hasServedUntil = false
        #expect(node.hasTags && node.moved == 5 && node.segment == .probation)
        node.hasTags = false
        #expect(!node.hasTags && node.moved == 5 && node.segment == .probation && !node.hasServedUntil)
    }

    @Test("insert stores tags; a replacement replaces them (untagged: none); a removal drops them")
    func insertReplaceRemove() throws {
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(log: log)
        try cache.insert(1, forKey: 1, tags: ["a", "b"])
        cache.insert(2, forKey: 2)
        #expect(cache.tags(forKey: 1) == Self.tags("a", "b"))
        #expect(cache.tags(forKey: 2) == EntryTags.none)
        #expect(cache.tags(forKey: 3) == nil)

        try cache.insert(10, forKey: 1, tags: ["c"])
        #expect(cache.value(forKey: 1) == 10)
        #expect(cache.tags(forKey: 1) == Self.tags("c"))
        #expect(cache.removeAll(taggedWith: "a") == 0, "the replaced entry's old tags are gone")
        #expect(cache.removeAll(taggedWith: "b") == 0)
        #expect(cache.value(forKey: 1) == 10)

        cache.insert(11, forKey: 1)
        #expect(cache.tags(forKey: 1) == EntryTags.none, "an untagged insert leaves the entry untagged")
        #expect(cache.removeAll(taggedWith: "c") == 0)
        #expect(Self.indexedTags(cache) == 0)

        try cache.insert(12, forKey: 1, tags: ["d"])
        #expect(cache.removeValue(forKey: 1) == 12)
        #expect(Self.indexedTags(cache) == 0, "a removal drops the entry from the index")
        #expect(Self.problems(cache).isEmpty)

        // Internal inserts: the two-tier cache's paths.
        cache.insert(20, forKey: 20, cost: nil, expires: 0, now: cache.now, tags: Self.tags("x"))
        let (removed, report) = cache.insertDeferringRemovals(
            21, forKey: 21, cost: nil, expires: 0, now: cache.now, tags: Self.tags("x", "y"))
        cache.finish(removed, report)
        #expect(cache.tags(forKey: 20) == Self.tags("x"))
        #expect(cache.tags(forKey: 21) == Self.tags("x", "y"))
        cache.insert(22, forKey: 20, cost: nil, expires: 0, now: cache.now)
        #expect(cache.tags(forKey: 20) == EntryTags.none)
        #expect(cache.removeAll(taggedWith: "x") == 1)
        #expect(Self.problems(cache).isEmpty)
    }

    @Test("removeAll(taggedWith:) removes exactly the tagged entries of every shard, told .explicit")
    func removeAllAcrossShards() throws {
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(log: log, shards: 8)
        for key in 0..<300 {
            var tags: Set<String> = []
            if key % 3 == 0 { tags.insert("three") }
            if key % 5 == 0 { tags.insert("five") }
            try cache.insert(key * 10, forKey: key, tags: tags)
        }
        let tagged = (0..<cache.shards.count).filter { i in cache.shards.withLock(at: i) { !$0.taggedNodes.isEmpty } }
        #expect(tagged.count == cache.shards.count, "every shard holds tagged entries")
        #expect(cache.removeAll(taggedWith: "three") == 100)
        let removed = log.all
        #expect(removed.count == 100)
        #expect(removed.allSatisfy { $0.reason == .explicit && $0.key % 3 == 0 && $0.value == $0.key * 10 })
        #expect(Set(removed.map(\.key)).count == 100)
        #expect(cache.totalCount == 200)
        for key in 0..<300 { #expect(cache.contains(key) == (key % 3 != 0)) }
        #expect(Self.problems(cache).isEmpty)
        // The entries carrying both went with the first tag: only five's others are left.
        log.clear()
        #expect(cache.removeAll(taggedWith: "five") == 40)
        #expect(Set(log.all.map(\.key)) == Set((0..<300).filter { $0 % 5 == 0 && $0 % 3 != 0 }))
        #expect(cache.removeAll(taggedWith: "five") == 0)
        #expect(cache.totalCount == 160)
        #expect(Self.indexedTags(cache) == 0)
        #expect(Self.problems(cache).isEmpty)
    }

    @Test("the deferring variant leaves the listener untold until finish")
    func deferring() throws {
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(log: log)
        for key in 0..<10 { try cache.insert(key, forKey: key, tags: ["t"]) }
        let (count, removed, report) = cache.removeAllDeferringRemovals(taggedWith: "t")
        #expect(count == 10 && removed.count == 10)
        #expect(log.all.isEmpty)
        #expect(cache.totalCount == 0)
        cache.finish(removed, report)
        #expect(log.all.count == 10 && log.all.allSatisfy { $0.reason == .explicit })
        let (none, nothing, _) = cache.removeAllDeferringRemovals(
            taggedWithStoredBytes: try EntryTags.storedBytes(of: "t"))
        #expect(none == 0 && nothing.isEmpty)
    }

    @Test("a removal by tag moves every shard's generation, so a promotion read before it is refused")
    func generationOfEveryShard() throws {
        let cache = Self.cache(shards: 8)
        try cache.insert(0, forKey: -1, tags: ["held"])
        // One key in each shard (an insert moves its own shard's generation).
        let keys = (0..<cache.shards.count).map { shard in (0...).first { cache.shardIndex($0.hashValue) == shard }! }
        // Control: with nothing in between, the conditional inserts land.
        var generations = keys.map { cache.lookUp($0).generation }
        for (key, generation) in zip(keys, generations) {
            cache.insert(key, forKey: key, cost: nil, expires: 0, now: cache.now, ifGeneration: generation)
        }
        #expect(keys.allSatisfy { cache.contains($0) })
        for key in keys { cache.removeValue(forKey: key) }

        generations = keys.map { cache.lookUp($0).generation }
        #expect(cache.removeAll(taggedWith: "unrelated") == 0)
        for (key, generation) in zip(keys, generations) {
            cache.insert(key, forKey: key, cost: nil, expires: 0, now: cache.now, ifGeneration: generation)
        }
        #expect(keys.allSatisfy { !cache.contains($0) }, "no promotion read before the removal by tag lands")
        #expect(cache.value(forKey: -1) == 0)

        generations = keys.map { cache.lookUp($0).generation }
        #expect(cache.removeAll(taggedWith: "held") == 1)
        for (key, generation) in zip(keys, generations) {
            cache.insert(key, forKey: key, cost: nil, expires: 0, now: cache.now, ifGeneration: generation)
        }
        #expect(keys.allSatisfy { !cache.contains($0) })
    }

    @Test("33 tags, an empty tag or a 256-byte tag throw .invalidTag and store nothing")
    func limits() throws {
        let cache = Self.cache()
        cache.insert(1, forKey: 1)
        let tooMany = Set((0..<33).map { "t\($0)" })
        let invalid: [Set<String>] = [
            tooMany, [""], ["ok", ""], [String(repeating: "x", count: 256)], [String(repeating: "\u{E9}", count: 128)],
        ]
        for tags in invalid {
            for key in [1, 2] {
                let error = #expect(throws: CacheError.self) { try cache.insert(2, forKey: key, tags: tags) }
                guard case .invalidTag = error else {
                    Issue.record("\(error as Any) for \(tags.count) tags")
                    continue
                }
            }
        }
        #expect(cache.value(forKey: 1) == 1, "the value already there stays")
        #expect(cache.tags(forKey: 1) == EntryTags.none)
        #expect(!cache.contains(2))
        #expect(cache.totalCount == 1)
        #expect(Self.indexedTags(cache) == 0)

        // At the limits: 32 tags, 255 bytes (duplicates and NFC-equal spellings count once).
        let most = Set((0..<32).map { "t\($0)" }).union(["t0"])
        try cache.insert(3, forKey: 3, tags: most)
        #expect(cache.tags(forKey: 3)?.tags.count == 32)
        // 31 tags and two spellings of one (Set keeps both only if String did not already call them equal).
        try cache.insert(4, forKey: 4, tags: Set((0..<31).map { "t\($0)" } + ["caf\u{E9}", "cafe\u{301}"]))
        #expect(cache.tags(forKey: 4)?.tags.count == 32)
        let longest = String(repeating: "x", count: 255)
        try cache.insert(5, forKey: 5, tags: [longest])
        #expect(cache.removeAll(taggedWith: "t31") == 1)
        #expect(cache.removeAll(taggedWith: longest) == 1)
        #expect(cache.removeAll(taggedWith: "t0") == 1)
        #expect(Self.indexedTags(cache) == 0)
        #expect(Self.problems(cache).isEmpty)
    }

    @Test("an invalid tag matches nothing: removeAll(taggedWith:) returns 0 without throwing")
    func invalidTagMatchesNothing() throws {
        let cache = Self.cache()
        try cache.insert(1, forKey: 1, tags: ["a"])
        #expect(cache.removeAll(taggedWith: "") == 0)
        #expect(cache.removeAll(taggedWith: String(repeating: "a", count: 256)) == 0)
        #expect(cache.totalCount == 1)
    }

    @Test("NFC-equivalent tags are one tag")
    func canonicalEquivalence() throws {
        let cache = Self.cache()
        try cache.insert(1, forKey: 1, tags: ["caf\u{E9}"])
        try cache.insert(2, forKey: 2, tags: ["cafe\u{301}", "caf\u{E9}"])
        #expect(cache.tags(forKey: 2)?.tags.count == 1)
        try cache.insert(3, forKey: 3, tags: ["\u{212B}"])  // ANGSTROM SIGN: NFC is U+00C5
        #expect(cache.removeAll(taggedWith: "cafe\u{301}") == 2)
        #expect(cache.removeAll(taggedWith: "A\u{30A}") == 1)
        #expect(cache.totalCount == 0)
        #expect(Self.indexedTags(cache) == 0)
    }

    @Test("evicted, expired and trimmed entries leave the tag index; dead ones still stored are removed by tag")
    func removalPathsLeaveTheIndex() throws {
        for policy in [IntCache.Policy.lru, .adaptive] {
            let clock = ManualClock()
            let log = RemovalLog<Int, Int>()
            // Count limit: evictions and admission losers.
            var cache = Self.cache(clock, log: log, shards: 1) {
                $0.countLimit = 10
                $0.policy = policy
            }
            for key in 0..<50 { try cache.insert(key, forKey: key, tags: ["t", "k\(key % 4)"]) }
            #expect(cache.totalCount == 10)
            #expect(Self.problems(cache).isEmpty)
            #expect(cache.removeAll(taggedWith: "t") == 10, "only the entries still held")
            #expect(Self.indexedTags(cache) == 0)

            // Cost limit, and an entry costing more than the limit (it goes at once, replacing).
            cache = Self.cache(clock, log: log, shards: 1) {
                $0.costLimit = 100
                $0.policy = policy
            }
            for key in 0..<30 { try cache.insert(key, forKey: key, cost: 10, tags: ["t"]) }
            try cache.insert(99, forKey: 3, cost: 1_000, tags: ["u"])
            #expect(Self.problems(cache).isEmpty)
            #expect(cache.removeAll(taggedWith: "u") == 0)
            let held = cache.totalCount
            #expect(held > 0 && held <= 10)
            #expect(cache.removeAll(taggedWith: "t") == held, "only the entries still held")
            #expect(cache.totalCount == 0)
            #expect(Self.indexedTags(cache) == 0)

            // Expiry: removeExpired, a read of an expired entry, a trim; dead entries count.
            cache = Self.cache(clock, log: log, shards: 1) { $0.policy = policy }
            for key in 0..<10 { try cache.insert(key, forKey: key, expiresAfter: .seconds(1), tags: ["e"]) }
            for key in 10..<20 { try cache.insert(key, forKey: key, tags: ["e"]) }
            clock.advance(by: .seconds(2))
            #expect(cache.value(forKey: 0) == nil)
            #expect(cache.removeAll(taggedWith: "e") == 19, "the nine expired entries still stored go too")
            for key in 0..<10 { try cache.insert(key, forKey: key, expiresAfter: .seconds(1), tags: ["e"]) }
            clock.advance(by: .seconds(2))
            cache.removeExpired()
            #expect(Self.indexedTags(cache) == 0)
            for key in 0..<10 { try cache.insert(key, forKey: key, expiresAfter: .seconds(1), tags: ["e"]) }
            clock.advance(by: .seconds(2))
            cache.trimPass()
            #expect(Self.indexedTags(cache) == 0)
            for key in 0..<10 { try cache.insert(key, forKey: key, expiresAfter: .seconds(1), tags: ["e"]) }
            clock.advance(by: .seconds(2))
            cache.trim(toCount: 100)
            #expect(Self.indexedTags(cache) == 0)

            // Trims by count, cost and age, and the age limit.
            cache = Self.cache(clock, log: log, shards: 1) {
                $0.policy = policy
                $0.ageLimit = .seconds(30)
            }
            for key in 0..<20 { try cache.insert(key, forKey: key, cost: 1, tags: ["a"]) }
            cache.trim(toCount: 15)
            cache.trim(toCost: 10)
            #expect(Self.problems(cache).isEmpty)
            #expect(cache.removeAll(taggedWith: "a") == 10)
            for key in 0..<20 { try cache.insert(key, forKey: key, tags: ["a"]) }
            clock.advance(by: .seconds(10))
            for key in 0..<5 { _ = cache.value(forKey: key) }
            clock.advance(by: .seconds(25))
            cache.trim(toAge: .seconds(30))
            #expect(Self.problems(cache).isEmpty)
            #expect(cache.removeAll(taggedWith: "a") == 5)
            for key in 0..<20 { try cache.insert(key, forKey: key, tags: ["a"]) }
            clock.advance(by: .seconds(31))
            cache.trimPass()
            #expect(cache.totalCount == 0)
            #expect(Self.indexedTags(cache) == 0)

            // removeAll and the close.
            for key in 0..<20 { try cache.insert(key, forKey: key, tags: ["a"]) }
            cache.removeAll()
            #expect(Self.indexedTags(cache) == 0)
            for key in 0..<20 { try cache.insert(key, forKey: key, tags: ["a"]) }
            cache.discardAllAndClose()
            #expect(Self.indexedTags(cache) == 0)
            try cache.insert(1, forKey: 1, tags: ["a"])
            #expect(Self.indexedTags(cache) == 0, "no insert after the close")
        }
    }

    // MARK: One shard, every path

    @Test("random operations on one shard, every removal path: the tag tables stay exact", arguments: [true, false])
    func shardStress(adaptive: Bool) {
        var random = PowerLossRandom(seed: adaptive ? 0x7A65 : 0x7A66)
        var shard = MemoryShard<Int, Int>(limits: .init(count: 40, cost: 900, age: 300), adaptive: adaptive, seed: 7)
        func hashTag(_ key: Int) -> UInt32 { UInt32(key & 7) &* 0x9E37_79B9 }
        let pool = ["a", "b", "c", "d", "e", "f"].map { try! EntryTags.storedBytes(of: $0) }
        var now: UInt64 = 1_000_000
        var failures = 0
        for step in 0..<15_000 where failures == 0 {
            now += random.next() % 4 == 0 ? random.next() % 40 : 0
            let key = Int(random.next() % 120)
            var removed = RemovedEntries<Int, Int>()
            switch random.next() % 12 {
            case 0..<5:
                let mask = random.next() % 64
                let tags = EntryTags(checked: pool.indices.filter { mask & (1 << $0) != 0 }.map { pool[$0] })
                let expires = random.next() % 8 == 0 ? now + random.next() % 300 : 0
                let servedUntil = expires > now + 1 && random.next() % 2 == 0 ? now + (expires - now) / 2 : 0
                shard.insert(
                    step, forKey: key, tag: hashTag(key), cost: Int(random.next() % 60), expires: expires,
                    servedUntil: servedUntil, now: now, removed: &removed, tags: tags)
            case 5:
                _ = shard.removeValue(forKey: key, tag: hashTag(key), now: now, removed: &removed)
            case 6:
                let bytes = pool[Int(random.next() % UInt64(pool.count))]
                let expected = shard.taggedNodes[bytes]?.count ?? 0
                let generation = shard.generation
                let count = shard.removeAll(taggedWith: bytes, removed: &removed)
                if count != expected || removed.count != count || shard.generation == generation {
                    failures += 1
                    Issue.record("step \(step): removed \(count) by tag, \(expected) indexed")
                }
            case 7 where random.next() % 10 == 0:
                shard.trim(
                    count: Int(random.next() % 40), cost: Int(random.next() % 900), accessedBefore: now - 200,
                    now: now, removed: &removed)
            case 8 where random.next() % 200 == 0:
                shard.removeAll(removed: &removed)
            case 9 where random.next() % 10 == 0:
                shard.removeExpired(inSlots: 0..<shard.nodeSlots, now: now, idleBefore: now - 250, removed: &removed)
                _ = shard.removeIdle(accessedBefore: now - 250, limit: 10, removed: &removed)
            case 10 where random.next() % 10 == 0:
                shard.removeExpired(now: now, removed: &removed)
            default:
                _ = shard.entry(
                    forKey: key, tag: hashTag(key), now: now, removed: &removed, counting: true, stale: true)
            }
            let problems = ShardInvariants.problems(shard, lookingUp: step % 8 == 0)
            if !problems.isEmpty {
                failures += 1
                Issue.record("step \(step), key \(key): \(problems.joined(separator: "; "))")
            }
        }
        let removals = shard.statistics.removals
        for reason in [RemovalReason.count, .cost, .age, .expired, .explicit, .replaced] {
            #expect(removals[reason.index] > 0, "the run removed entries for \(reason)")
        }
    }

    @Test("the invariant check finds a tag index entry for a gone node, a missing one, and a wrong flag")
    func checkerFindsTagDamage() {
        var shard = MemoryShard<Int, Int>(limits: .init(count: 10, cost: nil, age: nil), adaptive: true, seed: 1)
        var removed = RemovedEntries<Int, Int>()
        for key in 0..<6 {
            shard.insert(
                key, forKey: key, tag: UInt32(key), cost: 1, expires: 0, now: 0, removed: &removed,
                tags: key % 2 == 0 ? Self.tags("even") : .none)
        }
        let gone = shard.find(2, tag: 2)!
        _ = shard.removeValue(forKey: 2, tag: 2, now: 0, removed: &removed)
        #expect(ShardInvariants.problems(shard).isEmpty)
        let even = try! EntryTags.storedBytes(of: "even")

        var damaged = shard
        damaged.taggedNodes[even]!.insert(gone)
        #expect(!ShardInvariants.problems(damaged).isEmpty, "an index entry for a free node")

        damaged = shard
        damaged.taggedNodes[even]!.insert(shard.find(1, tag: 1)!)
        #expect(!ShardInvariants.problems(damaged).isEmpty, "an index entry for a node without the tag")

        damaged = shard
        damaged.taggedNodes[even]!.remove(shard.find(4, tag: 4)!)
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a tagged node missing from the index")

        damaged = shard
        damaged.nodes[Int(shard.find(4, tag: 4)!)].hasTags = false
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a tagged node not flagged")

        damaged = shard
        damaged.taggedNodes[[0x7A]] = []
        #expect(!ShardInvariants.problems(damaged).isEmpty, "an empty set")
    }

    // MARK: Model-based

    /// One step of a random sequence; the numbers pick from the tables of ``TagModel``.
    enum Step: CustomStringConvertible, Sendable {
        case insert(key: Int, tags: Int, expiry: Int, cost: Int)
        case read(key: Int)
        case remove(key: Int)
        case removeTagged(Int)
        case removeAll
        case trimToCount(Int)
        case trimToAge(Int)
        case removeExpired
        case trimPass
        case advance(Int)

        init(op: Int, a: Int, b: Int, c: Int) {
            switch op {
            case 0...4: self = .insert(key: a % 10, tags: b % 32, expiry: c % 4, cost: (a + b) % 4)
            case 5...6: self = .read(key: a % 10)
            case 7: self = .remove(key: a % 10)
            case 8...9: self = .removeTagged(b % TagModel.removalTags.count)
            case 10: self = a % 4 == 0 ? .removeAll : .trimToCount(b % 8)
            case 11: self = .trimToAge(c % 3)
            case 12: self = a % 2 == 0 ? .removeExpired : .trimPass
            default: self = .advance(c % 4)
            }
        }

        var description: String {
            switch self {
            case .insert(let key, let tags, let expiry, let cost):
                "insert(\(key), tags: \(TagModel.tagSet(tags).sorted()), expires: \(TagModel.expiries[expiry] as Any), cost: \(TagModel.costs[cost]))"
            case .read(let key): "read(\(key))"
            case .remove(let key): "remove(\(key))"
            case .removeTagged(let t): "removeAll(taggedWith: \(TagModel.removalTags[t].debugDescription))"
            case .removeAll: "removeAll"
            case .trimToCount(let n): "trim(toCount: \(n))"
            case .trimToAge(let t): "trim(toAge: \(TagModel.ages[t]))"
            case .removeExpired: "removeExpired"
            case .trimPass: "trimPass"
            case .advance(let t): "clock += \(TagModel.advances[t])"
            }
        }
    }

    struct Case: CustomStringConvertible, Sendable {
        let variant: Int
        let steps: [Step]
        var description: String {
            "variant \(variant), \(steps.count) steps:\n"
                + steps.enumerated().map { "  \($0): \($1)" }.joined(separator: "\n")
        }
    }

    /// What the tier stores, exactly: every entry it holds, live or not, with its tags. Evictions
    /// the policy chooses are learnt from the listener (each must be of an entry the model holds,
    /// with its value); every explicit removal is predicted.
    struct TagModel {
        static let pool = ["red", "green", "caf\u{E9}", "blue", "\u{212B}"]
        /// The pool's tags, other spellings of two of them, one never stored, and an invalid one.
        static let removalTags = pool + ["cafe\u{301}", "A\u{30A}", "grey", ""]
        static let expiries: [Duration?] = [nil, .seconds(1), .seconds(30), .zero]
        static let costs = [0, 1, 5, 20]
        static let ages: [Duration] = [.zero, .seconds(2), .seconds(40)]
        static let advances: [Duration] = [.milliseconds(1), .seconds(1), .seconds(2), .seconds(31)]

        static func tagSet(_ mask: Int) -> Set<String> {
            Set(pool.indices.filter { mask & (1 << $0) != 0 }.map { pool[$0] })
        }

        struct Entry {
            var value: Int
            var tags: EntryTags
            var expires: UInt64
            var accessed: UInt64
        }

        var entries: [Int: Entry] = [:]
        let age: UInt64?

        func isLive(_ entry: Entry, now: UInt64) -> Bool {
            if entry.expires != 0, now >= entry.expires { return false }
            if let age, now > entry.accessed, now - entry.accessed >= age { return false }
            return true
        }

        func keys(taggedWith tag: String) -> Set<Int> {
            guard let bytes = try? EntryTags.storedBytes(of: tag) else { return [] }
            return Set(entries.filter { $0.value.tags.bytes.contains(bytes) }.keys)
        }
    }

    static func stepGenerator() -> Generator<Case, AnySequence<(Int, [(Int, Int, Int, Int)])>> {
        let step = zip(Gen.int(in: 0...15), Gen.int(in: 0...9), Gen.int(in: 0...31), Gen.int(in: 0...3))
            .map { Step(op: $0.0, a: $0.1, b: $0.2, c: $0.3) }
        return zip(Gen.int(in: 0...2), step.array(of: 1...40))
            .map { Case(variant: $0, steps: $1) }.eraseToAnySequence()
    }

    @Test(
        "model-based: random tagged inserts, removals, removals by tag and trims agree with a model", .shrinking,
        ModelRun.seed)
    func modelBased() async {
        await propertyCheck(count: ModelRun.sequences(default: 600), input: Self.stepGenerator()) { Self.run($0) }
    }

    /// 0: no limits; 1: count 6 (adaptive); 2: count 8, cost 40 and age 30 s (LRU).
    static func run(_ test: Case) {
        let time = ManualClock()
        let log = RemovalLog<Int, Int>()
        let cache = Self.cache(time, log: log, shards: 4) {
            switch test.variant {
            case 1: $0.countLimit = 6
            case 2:
                $0.countLimit = 8
                $0.costLimit = 40
                $0.ageLimit = .seconds(30)
                $0.policy = .lru
            default: break
            }
        }
        var model = TagModel(age: cache.configuration.ageLimit.map { UInt64($0.components.seconds) * 1_000 })
        var check = ModelCheck()
        for (index, step) in test.steps.enumerated() {
            let now = cache.now
            let context = "step \(index) \(step)"
            var explicit: [Int: Int]? = nil  // the removals predicted exactly, key to value
            var replaced: (key: Int, value: Int)? = nil
            switch step {
            case .insert(let key, let mask, let expiry, let cost):
                let tags = TagModel.tagSet(mask)
                if let old = model.entries[key] { replaced = (key, old.value) }
                try! cache.insert(
                    index, forKey: key, cost: TagModel.costs[cost], expiresAfter: TagModel.expiries[expiry], tags: tags)
                model.entries[key] = .init(
                    value: index, tags: try! EntryTags(tags),
                    expires: TagModel.expiries[expiry].map { IntCache.deadline(now, $0) } ?? 0, accessed: now)
            case .read(let key):
                let got = cache.value(forKey: key)
                let expected = model.entries[key].flatMap { model.isLive($0, now: now) ? $0.value : nil }
                check.expect(got == expected, "\(context): read \(got as Any), the model's \(expected as Any)")
                if got != nil { model.entries[key]?.accessed = now }
            case .remove(let key):
                cache.removeValue(forKey: key)
                explicit = model.entries[key].map { [key: $0.value] } ?? [:]
                model.entries[key] = nil
            case .removeTagged(let t):
                let tag = TagModel.removalTags[t]
                let keys = model.keys(taggedWith: tag)
                let generations = (0..<cache.shards.count).map { i in cache.shards.withLock(at: i) { $0.generation } }
                let count = cache.removeAll(taggedWith: tag)
                check.expect(count == keys.count, "\(context): removed \(count), the model \(keys.count)")
                if !tag.isEmpty {
                    let moved = (0..<cache.shards.count).allSatisfy { i in
                        cache.shards.withLock(at: i) { $0.generation } != generations[i]
                    }
                    check.expect(moved, "\(context): a shard's generation did not move")
                }
                explicit = Dictionary(uniqueKeysWithValues: keys.map { ($0, model.entries[$0]!.value) })
                for key in keys { model.entries[key] = nil }
            case .removeAll:
                cache.removeAll()
                explicit = model.entries.mapValues(\.value)
                model.entries = [:]
            case .trimToCount(let n): cache.trim(toCount: n)
            case .trimToAge(let t): cache.trim(toAge: TagModel.ages[t])
            case .removeExpired: cache.removeExpired()
            case .trimPass: cache.trimPass()
            case .advance(let t): time.advance(by: TagModel.advances[t])
            }
            // What the listener heard.
            // (The memory tier always hands the value over.)
            let heard = log.all.map { (key: $0.key, value: $0.value ?? .min, reason: $0.reason) }
            log.clear()
            if let explicit {
                let got = Dictionary(heard.map { ($0.key, $0.value) }, uniquingKeysWith: { a, _ in a })
                check.expect(
                    heard.count == explicit.count && got == explicit && heard.allSatisfy { $0.reason == .explicit },
                    "\(context): heard \(heard.map { "\($0.key)=\($0.value) \($0.reason)" }), expected \(explicit)")
            } else {
                for removal in heard {
                    if removal.reason == .replaced, let replaced, replaced.key == removal.key,
                        replaced.value == removal.value
                    {
                        continue
                    }
                    check.expect(
                        removal.reason != .explicit && removal.reason != .replaced
                            && model.entries[removal.key]?.value == removal.value,
                        "\(context): heard \(removal.key)=\(removal.value) \(removal.reason), not the model's")
                    model.entries[removal.key] = nil
                }
            }
            // Every key's tags and presence, the totals and the shards' invariants.
            let after = cache.now
            for key in 0..<10 {
                let entry = model.entries[key]
                let live = entry.map { model.isLive($0, now: after) } ?? false
                let tags = cache.tags(forKey: key)
                check.expect(
                    tags == (live ? entry!.tags : nil),
                    "\(context): tags(forKey: \(key)) \(tags?.tags as Any), the model's \((live ? entry!.tags.tags : nil) as Any)"
                )
            }
            check.expect(
                cache.totalCount == model.entries.count,
                "\(context): \(cache.totalCount) entries, the model \(model.entries.count)")
            let problems = Self.problems(cache)
            check.expect(problems.isEmpty, "\(context): \(problems.joined(separator: "; "))")
            if check.failed { return }
        }
    }
}
