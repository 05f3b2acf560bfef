import Foundation
import PropertyBased
import Testing

@testable import LMDBCache

/// Random sequences against the two-tier ``Cache`` (memory in front of real LMDB files, closed
/// and reopened) and the reference model, compared after every step.
@Suite("Model-based: Cache against a reference model")
struct CacheModelTests {
    /// 0: no limits (exact); 1: every limit at its maximum (exact); 2: memory holds 2 entries, the
    /// disk all (exact: the disk backs what memory evicts); 3: memory 2 and disk 3 entries (lossy).
    static func configuration(_ variant: Int, clock: CacheClock) -> Cache<String, [UInt8]>.Configuration {
        var memory = MemoryCache<String, [UInt8]>.Configuration()
        var disk = DiskCache.Configuration()
        switch variant {
        case 1:
            memory = .init(countLimit: .max, costLimit: .max, ageLimit: .seconds(Int64.max))
            disk = .init(countLimit: .max, costLimit: .max, ageLimit: .seconds(Int64.max))
            disk.lowWaterMark = 1
        case 2:
            memory = .init(countLimit: 2)
        case 3:
            memory = .init(countLimit: 2)
            disk = .init(countLimit: 3)
            disk.lowWaterMark = 0.5
        default:
            break
        }
        memory.automaticTrimming = false
        disk.automaticTrimming = false
        disk.accessTimeGranularity = .zero
        var configuration = Cache<String, [UInt8]>.Configuration(memory: memory, disk: disk)
        configuration.clock = clock
        return configuration
    }

    @Test(
        "every step agrees with the model, across flushes and reopens; the store verifies clean", .shrinking,
        ModelRun.seed)
    func cacheMatchesModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 400), input: ModelCase.generator(variants: 4)) {
            Self.run($0)
        }
        print(ModelRun.summary("Cache"))
    }

    static func run(_ test: ModelCase) {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        let clock = time.clock
        let configuration = configuration(test.variant, clock: clock)
        let lossy = test.variant == 3
        var model = ReferenceModel()
        var check = ModelCheck()
        var steps = 0
        defer { ModelRun.count("Cache", steps: steps) }
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
                case .insert(let k, let v, let e, let c):
                    let key = ModelStep.keys[k]
                    cache.insert(
                        ModelStep.values[v], forKey: key, cost: ModelStep.costs[c], expiresAfter: ModelStep.expiries[e])
                    model.insert(key, ModelStep.values[v], cost: 0, expiresAfter: ModelStep.expiries[e], now: now)
                    if lossy { model.loseCertainty() }
                case .read(let k):
                    let key = ModelStep.keys[k]
                    let expected = model.expectation(key, now: now)
                    let actual = cache.value(forKey: key)
                    check.expect(
                        expected.allows(actual),
                        "\(name): expected \(expected), got \(actual.map { "\($0.count) B" } ?? "nil")")
                    model.read(key, found: actual, expected: expected, now: now)
                case .remove(let k):
                    cache.removeValue(forKey: ModelStep.keys[k])
                    model.remove(ModelStep.keys[k])
                case .removeAll:
                    cache.removeAll()
                    model.removeAll()
                    countsKnown = true
                case .trimToCount(let t):
                    cache.trim(toCount: ModelStep.countTargets[t])
                    model.removeExpired(now: now)
                    if ModelStep.countTargets[t] != .max { model.loseCertainty() }
                    countsKnown = true
                case .trimToCost(let t):
                    cache.trim(toCost: ModelStep.costTargets[t])
                    model.removeExpired(now: now)
                    if ModelStep.costTargets[t] != .max { model.loseCertainty() }
                    countsKnown = true
                case .trimToAge(let t):
                    cache.trim(toAge: ModelStep.ages[t])
                    model.removeExpired(now: now)
                    // Each tier keeps its own last use (a memory hit does not touch the disk's), so
                    // an entry idle that long in the model is gone from both, and any other may be
                    // gone from the tier that held it.
                    let age = ReferenceModel.milliseconds(ModelStep.ages[t])
                    model.removeIdle(age: age, now: now)
                    if now > age { model.loseCertainty() }
                    countsKnown = true
                case .removeExpired, .trimPass:
                    cache.removeExpired()
                    model.removeExpired(now: now)
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
                }
            } catch {
                check.expect(false, "\(name): threw \(error)")
            }
            compare(cache, &model, now: clock.milliseconds, countsKnown: countsKnown, step: name, &check)
            if check.failed { return }
        }
        do {
            try cache.flush()
            let report = try cache.disk!.store.verify()
            check.expect(report.isClean, "at the end: store not clean: \(report.problems)")
        } catch {
            check.expect(false, "at the end: \(error)")
        }
    }

    /// Every key's presence in either tier (not an access); after a commit, the disk's count
    /// within the model's bounds.
    static func compare(
        _ cache: Cache<String, [UInt8]>, _ model: inout ReferenceModel, now: UInt64, countsKnown: Bool, step: String,
        _ check: inout ModelCheck
    ) {
        for key in ModelStep.keys {
            let expected = model.expectation(key, now: now)
            let contains = cache.contains(key)
            check.expect(
                expected.allows(contains: contains),
                "after \(step): contains(\(key.prefix(8))…) is \(contains), expected \(expected)")
            if !contains, case .presentOrLost = expected { model.forget(key) }
        }
        guard countsKnown, let disk = cache.disk else { return }
        let counts = model.countBounds(now: now)
        check.expect(
            counts.contains(disk.totalCount), "after \(step): disk totalCount \(disk.totalCount) outside \(counts)")
    }
}
