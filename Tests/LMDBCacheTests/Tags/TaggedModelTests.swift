import Foundation
import PropertyBased
import Testing

@testable import LMDBCache

/// One operation of a tagged model-based sequence: ``ModelStep``'s operations with tags on
/// inserts, removals by tag, and (for the two-tier cache) dropping the memory tier so reads
/// promote from disk. Indexes pick from ``ModelStep``'s tables and the tag tables below.
enum TaggedStep: Sendable, CustomStringConvertible {
    case insert(key: Int, value: Int, expiry: Int, tags: Int)
    case read(key: Int)
    case remove(key: Int)
    case removeTagged(Int)
    case removeAll
    case trimToCount(Int)
    case trimToCost(Int)
    case trimToAge(Int)
    case removeExpired
    case trimPass
    case flush
    case reopen
    case advance(Int)
    case dropMemory

    /// Tag sets that name fewer tags than they look: canonically equal spellings.
    static let tagSets: [Set<String>] = [
        [], ["a"], ["b"], ["a", "b"], ["caf\u{E9}"], ["cafe\u{301}", "a"], ["\u{212B}"],
        ["A\u{30A}", "b", "caf\u{E9}"],
    ]
    /// The tags removals ask for, in other spellings too, and one no entry carries.
    static let queries = ["a", "b", "cafe\u{301}", "caf\u{E9}", "\u{C5}", "zzz"]

    init(op: Int, a: Int, b: Int, c: Int, d: Int) {
        switch op {
        case 0...4: self = .insert(key: a % 9, value: b % 12, expiry: c % 8, tags: d % 8)
        case 5...6: self = .read(key: a % 9)
        case 7: self = .remove(key: a % 9)
        case 8...9: self = .removeTagged(b % Self.queries.count)
        case 10: self = .removeAll
        case 11: self = .trimToCount(b % 5)
        case 12: self = .trimToCost(b % 5)
        case 13: self = .trimToAge(c % 5)
        case 14: self = a % 2 == 0 ? .removeExpired : .trimPass
        case 15: self = a % 2 == 0 ? .flush : .reopen
        case 16: self = .advance(b % 6)
        default: self = .dropMemory
        }
    }

    static func shown(_ text: String) -> String {
        let short = text.count > 20 ? "p×600+" + String(text.dropFirst(600)) : text
        return "\""
            + short.unicodeScalars.map { $0.isASCII ? String($0) : "\\u{\(String($0.value, radix: 16))}" }.joined()
            + "\""
    }

    var description: String {
        switch self {
        case .insert(let k, let v, let e, let t):
            let tags = Self.tagSets[t].sorted().map(Self.shown).joined(separator: ", ")
            return
                "insert(\(Self.shown(ModelStep.keys[k])), \(ModelStep.values[v].count) B #\(v / 6), expires: \(ModelStep.expiries[e].map { "\($0)" } ?? "never"), tags: [\(tags)])"
        case .read(let k): return "read(\(Self.shown(ModelStep.keys[k])))"
        case .remove(let k): return "remove(\(Self.shown(ModelStep.keys[k])))"
        case .removeTagged(let q): return "removeAll(taggedWith: \(Self.shown(Self.queries[q])))"
        case .removeAll: return "removeAll"
        case .trimToCount(let t): return "trim(toCount: \(ModelStep.countTargets[t]))"
        case .trimToCost(let t): return "trim(toCost: \(ModelStep.costTargets[t]))"
        case .trimToAge(let t): return "trim(toAge: \(ModelStep.ages[t]))"
        case .removeExpired: return "removeExpired"
        case .trimPass: return "trimPass"
        case .flush: return "flush"
        case .reopen: return "close and reopen"
        case .advance(let t): return "clock += \(ModelStep.advances[t])"
        case .dropMemory: return "drop the memory tier (Cache) / flush (DiskCache)"
        }
    }
}

/// A configuration variant and the tagged steps to run on it.
struct TaggedCase: Sendable, CustomStringConvertible {
    let variant: Int
    let steps: [TaggedStep]

    var description: String {
        "variant \(variant), \(steps.count) steps:\n"
            + steps.enumerated().map { "  \($0): \($1)" }.joined(separator: "\n")
    }

    static func generator(variants: Int, maxSteps: Int = 30)
        -> Generator<TaggedCase, AnySequence<(Int, [(Int, Int, Int, Int, Int)])>>
    {
        let step = zip(
            Gen.int(in: 0...17), Gen.int(in: 0...8), Gen.int(in: 0...11), Gen.int(in: 0...7), Gen.int(in: 0...7)
        ).map { raw in TaggedStep(op: raw.0, a: raw.1, b: raw.2, c: raw.3, d: raw.4) }
        return zip(Gen.int(in: 0...(variants - 1)), step.array(of: 1...maxSteps))
            .map { variant, steps in TaggedCase(variant: variant, steps: steps) }.eraseToAnySequence()
    }
}

/// ``ReferenceModel`` with each entry's tags (compared as Swift compares strings: canonically).
struct TaggedModel {
    var base = ReferenceModel()
    private(set) var tags: [String: Set<String>] = [:]

    mutating func insert(_ key: String, _ value: [UInt8], tags: Set<String>, expiresAfter: Duration?, now: UInt64) {
        base.insert(key, value, cost: 0, expiresAfter: expiresAfter, now: now)
        self.tags[key] = tags
    }

    /// The tags of the model's entry for `key` (empty when it has none or there is none).
    func tags(of key: String) -> Set<String> {
        base.entries[key] == nil ? [] : tags[key] ?? []
    }

    /// The entries carrying `tag`.
    func keys(taggedWith tag: String) -> [String] {
        base.entries.keys.filter { tags[$0]?.contains(tag) == true }
    }

    /// How many entries a removal by `tag` may report: at least the certain live ones carrying
    /// it, at most every one the model holds with it (expired ones not yet trimmed included).
    func removalBounds(_ tag: String, now: UInt64) -> ClosedRange<Int> {
        let keys = keys(taggedWith: tag)
        let certain = keys.filter { key in
            let entry = base.entries[key]!
            return entry.certain && !ReferenceModel.isExpired(entry, at: now)
        }.count
        return certain...keys.count
    }

    mutating func removeAll(taggedWith tag: String) {
        for key in keys(taggedWith: tag) { base.remove(key) }
    }
}

/// Random sequences with tags against ``DiskCache`` and ``Cache`` (real LMDB files, closed and
/// reopened) and the tagged reference model, compared after every step: values, each entry's
/// tags (disk records and memory entries), what a removal by tag removes and reports, and the
/// tag index against the records.
@Suite("Model-based: tags in DiskCache and Cache against a reference model")
struct TaggedModelTests {
    @Test(
        "DiskCache: every step agrees with the tagged model; the tag index matches the records", .shrinking,
        ModelRun.seed)
    func diskCacheMatchesTaggedModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 250), input: TaggedCase.generator(variants: 4)) {
            Self.runDisk($0)
        }
        print(ModelRun.summary("DiskCache+tags"))
    }

    @Test("Cache: every step agrees with the tagged model in both tiers", .shrinking, ModelRun.seed)
    func cacheMatchesTaggedModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 250), input: TaggedCase.generator(variants: 4)) {
            Self.runCache($0)
        }
        print(ModelRun.summary("Cache+tags"))
    }

    /// The committed tag index agrees with the committed records.
    static func checkIndex(_ disk: DiskCache, step: String, _ check: inout ModelCheck) {
        do {
            let problems = try TagIndexAudit.problems(disk)
            check.expect(problems.isEmpty, "after \(step): tag index: \(problems.prefix(3))")
        } catch {
            check.expect(false, "after \(step): reading the tag index threw \(error)")
        }
    }

    /// Each live disk entry (queued or committed; not an access) carries the model's tags.
    static func checkDiskTags(
        _ disk: DiskCache, _ model: TaggedModel, now: UInt64, step: String, _ check: inout ModelCheck
    ) {
        for key in ModelStep.keys {
            let found: DiskStore.Lookup
            do {
                found = try disk.withStore { try $0.lookUp(try StorageKey(key.cacheKeyBytes), now: now) }
            } catch {
                check.expect(false, "after \(step): lookUp threw \(error)")
                return
            }
            guard case .hit(_, _, _, _, let tags, _) = found, model.base.entries[key] != nil else { continue }
            let expected = try! EntryTags(model.tags(of: key))
            check.expect(
                tags == expected,
                "after \(step): disk tags of \(TaggedStep.shown(key)) are \(tags.tags), expected \(expected.tags)")
        }
    }

    static func runDisk(_ test: TaggedCase) {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        let clock = time.clock
        let configuration = DiskCacheModelTests.configuration(test.variant, clock: clock)
        let age = configuration.ageLimit.map(ReferenceModel.milliseconds)
        let lossy = test.variant == 2
        var model = TaggedModel()
        var check = ModelCheck()
        var steps = 0
        defer {
            ModelRun.count("DiskCache+tags", steps: steps)
            if let message = check.message { print("DiskCache+tags model: \(message)") }
        }
        var disk: DiskCache
        do {
            disk = try DiskCache(directory: dir.url, configuration: configuration)
        } catch {
            check.expect(false, "open failed: \(error)")
            return
        }
        defer { disk.close() }
        for (index, step) in test.steps.enumerated() {
            steps += 1
            let now = clock.milliseconds
            let name = "step \(index) \(step)"
            var countsKnown = false
            do {
                switch step {
                case .insert(let k, let v, let e, let t):
                    let key = ModelStep.keys[k]
                    do {
                        try disk.setData(
                            ModelStep.values[v], forKey: key.cacheKeyBytes, expiresAfter: ModelStep.expiries[e],
                            tags: TaggedStep.tagSets[t])
                        model.insert(
                            key, ModelStep.values[v], tags: TaggedStep.tagSets[t], expiresAfter: ModelStep.expiries[e],
                            now: now)
                    } catch CacheError.valueTooLarge where lossy {
                        // Refused under the cost limit: the old value stays, as documented.
                    }
                    if lossy { model.base.loseCertainty() }
                case .read(let k):
                    let key = ModelStep.keys[k]
                    let expected = model.base.expectation(key, now: now)
                    let actual = try disk.data(forKey: key)
                    check.expect(
                        expected.allows(actual),
                        "\(name): expected \(expected), got \(actual.map { "\($0.count) B" } ?? "nil")")
                    model.base.read(key, found: actual, expected: expected, now: now)
                case .remove(let k):
                    try disk.removeData(forKey: ModelStep.keys[k])
                    model.base.remove(ModelStep.keys[k])
                case .removeTagged(let q):
                    let tag = TaggedStep.queries[q]
                    let bounds = model.removalBounds(tag, now: now)
                    let removed = try disk.removeAll(taggedWith: tag)
                    check.expect(bounds.contains(removed), "\(name): removed \(removed), expected \(bounds)")
                    model.removeAll(taggedWith: tag)
                    check.expect(
                        try disk.storedKeys(taggedWith: tag).isEmpty, "\(name): entries still carry the tag")
                    countsKnown = true
                case .removeAll:
                    try disk.removeAll()
                    model.base.removeAll()
                    countsKnown = true
                case .trimToCount(let t):
                    try disk.trim(toCount: ModelStep.countTargets[t])
                    model.base.removeExpired(now: now)
                    if ModelStep.countTargets[t] != .max { model.base.loseCertainty() }
                    countsKnown = true
                case .trimToCost(let t):
                    try disk.trim(toCost: ModelStep.costTargets[t])
                    model.base.removeExpired(now: now)
                    if ModelStep.costTargets[t] != .max { model.base.loseCertainty() }
                    countsKnown = true
                case .trimToAge(let t):
                    try disk.trim(toAge: ModelStep.ages[t])
                    model.base.removeExpired(now: now)
                    model.base.removeIdle(age: ReferenceModel.milliseconds(ModelStep.ages[t]), now: now)
                    countsKnown = true
                case .removeExpired:
                    try disk.removeExpired()
                    model.base.removeExpired(now: now)
                    countsKnown = true
                case .trimPass:
                    disk.trimPass()
                    model.base.removeExpired(now: now)
                    if let age { model.base.removeIdle(age: age, now: now) }
                    if lossy { model.base.loseCertainty() }
                    countsKnown = true
                case .flush, .dropMemory:
                    try disk.flush()
                    countsKnown = true
                case .reopen:
                    disk.close()
                    disk = try DiskCache(directory: dir.url, configuration: configuration)
                    countsKnown = true
                case .advance(let t):
                    time.advance(by: ModelStep.advances[t])
                }
            } catch {
                check.expect(false, "\(name): threw \(error)")
            }
            DiskCacheModelTests.compare(
                disk, &model.base, now: clock.milliseconds, countsKnown: countsKnown, step: name, &check)
            checkDiskTags(disk, model, now: clock.milliseconds, step: name, &check)
            checkIndex(disk, step: name, &check)
            if check.failed { return }
        }
        do {
            try disk.flush()
            checkIndex(disk, step: "the end", &check)
            let report = try disk.store.verify()
            check.expect(report.isClean, "at the end: store not clean: \(report.problems)")
        } catch {
            check.expect(false, "at the end: \(error)")
        }
    }

    static func runCache(_ test: TaggedCase) {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        let clock = time.clock
        var configuration = CacheModelTests.configuration(test.variant, clock: clock)
        configuration.coherence = .off
        let lossy = test.variant == 3
        var model = TaggedModel()
        var check = ModelCheck()
        var steps = 0
        defer {
            ModelRun.count("Cache+tags", steps: steps)
            if let message = check.message { print("Cache+tags model: \(message)") }
        }
        var cache: Cache<String, [UInt8]>
        do {
            cache = try Cache(directory: dir.url, configuration: configuration)
        } catch {
            check.expect(false, "open failed: \(error)")
            return
        }
        defer { cache.close() }
        for (index, step) in test.steps.enumerated() {
            steps += 1
            let now = clock.milliseconds
            let name = "step \(index) \(step)"
            var countsKnown = false
            do {
                switch step {
                case .insert(let k, let v, let e, let t):
                    let key = ModelStep.keys[k]
                    cache.insert(
                        ModelStep.values[v], forKey: key, expiresAfter: ModelStep.expiries[e],
                        tags: TaggedStep.tagSets[t])
                    model.insert(
                        key, ModelStep.values[v], tags: TaggedStep.tagSets[t], expiresAfter: ModelStep.expiries[e],
                        now: now)
                    if lossy { model.base.loseCertainty() }
                case .read(let k):
                    let key = ModelStep.keys[k]
                    let expected = model.base.expectation(key, now: now)
                    let actual = cache.value(forKey: key)
                    check.expect(
                        expected.allows(actual),
                        "\(name): expected \(expected), got \(actual.map { "\($0.count) B" } ?? "nil")")
                    model.base.read(key, found: actual, expected: expected, now: now)
                case .remove(let k):
                    cache.removeValue(forKey: ModelStep.keys[k])
                    model.base.remove(ModelStep.keys[k])
                case .removeTagged(let q):
                    let tag = TaggedStep.queries[q]
                    let bounds = model.removalBounds(tag, now: now)
                    let removed = cache.removeAll(taggedWith: tag)
                    check.expect(bounds.contains(removed), "\(name): removed \(removed), expected \(bounds)")
                    model.removeAll(taggedWith: tag)
                    check.expect(
                        try cache.disk!.storedKeys(taggedWith: tag).isEmpty, "\(name): disk entries still carry the tag"
                    )
                    for key in ModelStep.keys {
                        let tags = cache.memory.tags(forKey: key)
                        check.expect(
                            tags.map { !$0.tags.contains(tag) } ?? true,
                            "\(name): memory still holds \(TaggedStep.shown(key)) with the tag")
                    }
                    countsKnown = true
                case .removeAll:
                    cache.removeAll()
                    model.base.removeAll()
                    countsKnown = true
                case .trimToCount(let t):
                    cache.trim(toCount: ModelStep.countTargets[t])
                    model.base.removeExpired(now: now)
                    if ModelStep.countTargets[t] != .max { model.base.loseCertainty() }
                    countsKnown = true
                case .trimToCost(let t):
                    cache.trim(toCost: ModelStep.costTargets[t])
                    model.base.removeExpired(now: now)
                    if ModelStep.costTargets[t] != .max { model.base.loseCertainty() }
                    countsKnown = true
                case .trimToAge(let t):
                    cache.trim(toAge: ModelStep.ages[t])
                    model.base.removeExpired(now: now)
                    let age = ReferenceModel.milliseconds(ModelStep.ages[t])
                    model.base.removeIdle(age: age, now: now)
                    if now > age { model.base.loseCertainty() }
                    countsKnown = true
                case .removeExpired, .trimPass:
                    cache.removeExpired()
                    model.base.removeExpired(now: now)
                    countsKnown = true
                case .flush:
                    try cache.flush()
                    countsKnown = true
                case .reopen:
                    cache.close()
                    cache = try Cache(directory: dir.url, configuration: configuration)
                    countsKnown = true
                case .advance(let t):
                    time.advance(by: ModelStep.advances[t])
                case .dropMemory:
                    cache.memory.removeAll()
                }
            } catch {
                check.expect(false, "\(name): threw \(error)")
            }
            CacheModelTests.compare(
                cache, &model.base, now: clock.milliseconds, countsKnown: countsKnown, step: name, &check)
            // Memory entries (promoted from disk or inserted) carry the model's tags.
            for key in ModelStep.keys {
                guard let tags = cache.memory.tags(forKey: key), model.base.entries[key] != nil else { continue }
                let expected = try! EntryTags(model.tags(of: key))
                check.expect(
                    tags == expected,
                    "after \(name): memory tags of \(TaggedStep.shown(key)) are \(tags.tags), expected \(expected.tags)"
                )
            }
            checkDiskTags(cache.disk!, model, now: clock.milliseconds, step: name, &check)
            checkIndex(cache.disk!, step: name, &check)
            if check.failed { return }
        }
        do {
            try cache.flush()
            checkIndex(cache.disk!, step: "the end", &check)
            let report = try cache.disk!.store.verify()
            check.expect(report.isClean, "at the end: store not clean: \(report.problems)")
        } catch {
            check.expect(false, "at the end: \(error)")
        }
    }
}
