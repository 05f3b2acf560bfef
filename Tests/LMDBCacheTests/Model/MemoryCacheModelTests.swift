import Foundation
import PropertyBased
import Testing

@testable import LMDBCache

/// Random sequences against ``MemoryCache`` and the reference model, compared after every step.
@Suite("Model-based: MemoryCache against a reference model")
struct MemoryCacheModelTests {
    /// 0: no limits (exact); 1: every limit at its maximum (exact); 2: count 3, cost 200,000 and
    /// age 60 s (lossy: evictions allowed, wrong values never); 3: age limit 30 s only (exact).
    static func configuration(_ variant: Int, clock: CacheClock) -> MemoryCache<String, [UInt8]>.Configuration {
        var configuration = MemoryCache<String, [UInt8]>.Configuration()
        switch variant {
        case 1:
            configuration = .init(countLimit: .max, costLimit: .max, ageLimit: .seconds(Int64.max))
        case 2:
            configuration = .init(countLimit: 3, costLimit: 200_000, ageLimit: .seconds(60))
        case 3:
            configuration = .init(ageLimit: .seconds(30))
        default:
            break
        }
        configuration.automaticTrimming = false
        configuration.clock = clock
        return configuration
    }

    @Test("every step agrees with the model: values, expiry, age, removals and totals", .shrinking, ModelRun.seed)
    func memoryCacheMatchesModel() async {
        await propertyCheck(count: ModelRun.sequences(default: 1_500), input: ModelCase.generator(variants: 4)) {
            Self.run($0)
        }
        print(ModelRun.summary("MemoryCache"))
    }

    static func run(_ test: ModelCase) {
        let time = ManualClock()
        let clock = time.clock
        let configuration = configuration(test.variant, clock: clock)
        let cache = MemoryCache<String, [UInt8]>(configuration: configuration)
        let age = configuration.ageLimit.map(ReferenceModel.milliseconds)
        let lossy = test.variant == 2
        var model = ReferenceModel()
        var check = ModelCheck()
        var steps = 0
        defer { ModelRun.count("MemoryCache", steps: steps) }
        for (index, step) in test.steps.enumerated() {
            steps += 1
            let now = clock.milliseconds
            switch step {
            case .insert(let k, let v, let e, let c):
                let key = ModelStep.keys[k]
                cache.insert(
                    ModelStep.values[v], forKey: key, cost: ModelStep.costs[c], expiresAfter: ModelStep.expiries[e])
                model.insert(
                    key, ModelStep.values[v], cost: max(0, ModelStep.costs[c] ?? 0),
                    expiresAfter: ModelStep.expiries[e], now: now)
                // A cost limit of .max still holds: past it in sum, entries may go.
                if lossy || (test.variant == 1 && model.costBounds(now: now).upperBound == .max) {
                    model.loseCertainty()
                }
            case .read(let k):
                let key = ModelStep.keys[k]
                let expected = model.expectation(key, now: now, idleAge: age)
                let actual = cache.value(forKey: key)
                check.expect(
                    expected.allows(actual),
                    "step \(index) \(step): expected \(expected), got \(actual.map { "\($0.count) B" } ?? "nil")")
                model.read(key, found: actual, expected: expected, now: now)
            case .remove(let k):
                cache.removeValue(forKey: ModelStep.keys[k])
                model.remove(ModelStep.keys[k])
            case .removeAll:
                cache.removeAll()
                model.removeAll()
            case .trimToCount(let t):
                cache.trim(toCount: ModelStep.countTargets[t])
                model.removeExpired(now: now)
                if ModelStep.countTargets[t] != .max { model.loseCertainty() }
            case .trimToCost(let t):
                cache.trim(toCost: ModelStep.costTargets[t])
                model.removeExpired(now: now)
                // Even to .max: a shard whose entries cost more than Int.max in sum trims too.
                if ModelStep.costTargets[t] != .max || model.costBounds(now: now).upperBound == .max {
                    model.loseCertainty()
                }
            case .trimToAge(let t):
                cache.trim(toAge: ModelStep.ages[t])
                model.removeExpired(now: now)
                model.removeIdle(age: ReferenceModel.milliseconds(ModelStep.ages[t]), now: now)
            case .removeExpired:
                cache.removeExpired()
                model.removeExpired(now: now)
            case .trimPass:
                cache.trimPass()
                model.removeExpired(now: now)
                if let age { model.removeIdle(age: age, now: now) }
            case .flush, .reopen:
                break
            case .advance(let t):
                time.advance(by: ModelStep.advances[t])
            }
            compare(cache, &model, now: clock.milliseconds, age: age, step: "step \(index) \(step)", &check)
            if check.failed { return }
        }
    }

    /// Every key's presence (not an access), and the totals within what the model allows.
    static func compare(
        _ cache: MemoryCache<String, [UInt8]>, _ model: inout ReferenceModel, now: UInt64, age: UInt64?, step: String,
        _ check: inout ModelCheck
    ) {
        for key in ModelStep.keys {
            let expected = model.expectation(key, now: now, idleAge: age)
            let contains = cache.contains(key)
            check.expect(
                expected.allows(contains: contains),
                "after \(step): contains(\(key.prefix(8))…) is \(contains), expected \(expected)")
            if !contains, case .presentOrLost = expected { model.forget(key) }
        }
        let counts = model.countBounds(now: now, idleAge: age)
        check.expect(
            counts.contains(cache.totalCount), "after \(step): totalCount \(cache.totalCount) outside \(counts)")
        let costs = model.costBounds(now: now, idleAge: age)
        check.expect(costs.contains(cache.totalCost), "after \(step): totalCost \(cache.totalCost) outside \(costs)")
        if let limit = cache.configuration.countLimit {
            check.expect(cache.totalCount <= limit, "after \(step): count over its limit")
        }
        if let limit = cache.configuration.costLimit {
            check.expect(cache.totalCost <= limit, "after \(step): cost over its limit")
        }
    }
}
