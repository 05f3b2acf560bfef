import Foundation
import PropertyBased
import Testing

@testable import LMDBCache

/// Random sequences against ``DiskCache`` (real LMDB files, closed and reopened) and the
/// reference model, compared after every step.
@Suite("Model-based: DiskCache against a reference model")
struct DiskCacheModelTests {
    /// 0: no limits (exact); 1: every limit at its maximum, low-water mark 1 (exact); 2: count 3,
    /// cost 300,000 bytes, age 60 s, low-water mark 0.5 (lossy); 3: age limit 30 s only (exact).
    static func configuration(_ variant: Int, clock: CacheClock) -> DiskCache.Configuration {
        var configuration = DiskCache.Configuration()
        switch variant {
        case 1:
            configuration = .init(countLimit: .max, costLimit: .max, ageLimit: .seconds(Int64.max))
            configuration.lowWaterMark = 1
        case 2:
            configuration = .init(countLimit: 3, costLimit: 300_000, ageLimit: .seconds(60))
            configuration.lowWaterMark = 0.5
        case 3:
            configuration = .init(ageLimit: .seconds(30))
        default:
            break
        }
        configuration.automaticTrimming = false
        configuration.accessTimeGranularity = .zero
        configuration.clock = clock
        return configuration
    }

    @Test(
        "every step agrees with the model, across flushes and reopens; the store verifies clean", .shrinking,
        ModelRun.seed)
    func diskCacheMatchesModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 400), input: ModelCase.generator(variants: 4)) {
            Self.run($0)
        }
        print(ModelRun.summary("DiskCache"))
    }

    static func run(_ test: ModelCase) {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let time = ManualClock()
        let clock = time.clock
        let configuration = configuration(test.variant, clock: clock)
        let age = configuration.ageLimit.map(ReferenceModel.milliseconds)
        let lossy = test.variant == 2
        var model = ReferenceModel()
        // A read records a use only when the one on record is at least an eighth of the store's
        // access span (every use lies after the clock's start) and of the age limit old
        // (DiskTier.md): a trim to an age may take an entry read less than that ago.
        let start = clock.milliseconds
        model.accessLag = { now in min(now > start ? now - start : 0, age ?? .max) / 8 }
        var check = ModelCheck()
        var steps = 0
        defer { ModelRun.count("DiskCache", steps: steps) }
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
                case .insert(let k, let v, let e, _):
                    let key = ModelStep.keys[k]
                    do {
                        try disk.setData(ModelStep.values[v], forKey: key, expiresAfter: ModelStep.expiries[e])
                        model.insert(key, ModelStep.values[v], cost: 0, expiresAfter: ModelStep.expiries[e], now: now)
                    } catch CacheError.valueTooLarge where lossy {
                        // Refused under the cost limit: the old value stays, as documented.
                    }
                    if lossy { model.loseCertainty() }
                case .read(let k):
                    let key = ModelStep.keys[k]
                    let expected = model.expectation(key, now: now)
                    let actual = try disk.data(forKey: key)
                    check.expect(
                        expected.allows(actual),
                        "\(name): expected \(expected), got \(actual.map { "\($0.count) B" } ?? "nil")")
                    model.read(key, found: actual, expected: expected, now: now)
                case .remove(let k):
                    try disk.removeData(forKey: ModelStep.keys[k])
                    model.remove(ModelStep.keys[k])
                case .removeAll:
                    try disk.removeAll()
                    model.removeAll()
                    countsKnown = true
                case .trimToCount(let t):
                    try disk.trim(toCount: ModelStep.countTargets[t])
                    model.removeExpired(now: now)
                    if ModelStep.countTargets[t] != .max { model.loseCertainty() }
                    countsKnown = true
                case .trimToCost(let t):
                    try disk.trim(toCost: ModelStep.costTargets[t])
                    model.removeExpired(now: now)
                    if ModelStep.costTargets[t] != .max { model.loseCertainty() }
                    countsKnown = true
                case .trimToAge(let t):
                    try disk.trim(toAge: ModelStep.ages[t])
                    model.removeExpired(now: now)
                    let age = ReferenceModel.milliseconds(ModelStep.ages[t])
                    model.removeIdle(age: age, now: now)
                    countsKnown = true
                case .removeExpired:
                    try disk.removeExpired()
                    model.removeExpired(now: now)
                    countsKnown = true
                case .trimPass:
                    disk.trimPass()
                    model.removeExpired(now: now)
                    if let age { model.removeIdle(age: age, now: now) }
                    if lossy { model.loseCertainty() }
                    countsKnown = true
                case .flush:
                    try disk.flush()
                    countsKnown = true
                case .reopen:
                    disk.close()
                    disk = try DiskCache(directory: dir.url, configuration: configuration)
                    let report = try disk.store.verify()
                    check.expect(report.isClean, "\(name): store not clean: \(report.problems)")
                    countsKnown = true
                case .advance(let t):
                    time.advance(by: ModelStep.advances[t])
                }
            } catch {
                check.expect(false, "\(name): threw \(error)")
            }
            compare(disk, &model, now: clock.milliseconds, countsKnown: countsKnown, step: name, &check)
            if check.failed { return }
        }
        do {
            try disk.flush()
            let report = try disk.store.verify()
            check.expect(report.isClean, "at the end: store not clean: \(report.problems)")
        } catch {
            check.expect(false, "at the end: \(error)")
        }
    }

    /// Every key's presence (not an access); after a commit, the totals within the model's bounds.
    static func compare(
        _ disk: DiskCache, _ model: inout ReferenceModel, now: UInt64, countsKnown: Bool, step: String,
        _ check: inout ModelCheck
    ) {
        for key in ModelStep.keys {
            let expected = model.expectation(key, now: now)
            let contains = (try? disk.containsData(forKey: key)) ?? false
            check.expect(
                expected.allows(contains: contains),
                "after \(step): containsData(\(key.prefix(8))…) is \(contains), expected \(expected)")
            if !contains, case .presentOrLost = expected { model.forget(key) }
        }
        guard countsKnown else { return }
        let counts = model.countBounds(now: now)
        let (count, cost) = (disk.totalCount, disk.totalCost)
        check.expect(counts.contains(count), "after \(step): totalCount \(count) outside \(counts)")
        check.expect((count == 0) == (cost == 0) && cost >= 0, "after \(step): totalCost \(cost) for \(count) entries")
    }
}
