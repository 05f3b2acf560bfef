import Dispatch
import Testing

@_spi(Diagnostics) @testable import LMDBCache

@Suite("Window climber")
struct WindowClimberTests {
    @Test("the first sample shrinks the window, as Caffeine's; where recency pays the next turns it round")
    func firstMoves() {
        var frequency = AdaptiveWindow()
        #expect(frequency.step == -AdaptiveWindow.fullStep)
        // The first sample is measured against a hit ratio of 0: a rise of 50 points restarts the
        // climb downwards with a full step, and the window goes from 1 % to nothing.
        let moved = frequency.record(hits: 500, lookups: 1_000)
        #expect(moved)
        #expect(frequency.share == 0)
        #expect(frequency.step == -AdaptiveWindow.fullStep)
        // Where recency pays the hit ratio falls without the window, so the climb turns round.
        var recency = frequency
        _ = recency.record(hits: 400, lookups: 1_000)
        #expect(recency.share == AdaptiveWindow.fullStep)
        #expect(recency.step == AdaptiveWindow.fullStep)
    }

    @Test("a sample lasts one capacity while the step is full and lengthens as it decays, up to ten")
    func sampleLengthensAsTheStepDecays() {
        var window = AdaptiveWindow()
        #expect(window.sampleLength == AdaptiveWindow.shortestSample)
        _ = window.record(hits: 500, lookups: 1_000)
        #expect(window.step == -AdaptiveWindow.fullStep)
        var expected = -AdaptiveWindow.fullStep
        for sample in 1...200 {
            // A stationary hit ratio: each sample moves on, by a step decayed once more.
            _ = window.record(hits: 500, lookups: 1_000)
            expected *= AdaptiveWindow.decay
            #expect(abs(window.step - expected) < 1e-12, "sample \(sample)")
            let length = min(max(AdaptiveWindow.fullStep / abs(expected), 1), 10)
            #expect(abs(window.sampleLength - length) < 1e-9, "sample \(sample)")
        }
        #expect(window.sampleLength == AdaptiveWindow.longestSample, "0.98^200 is below a tenth")
        #expect(window.share == 0)
    }

    @Test("a hit ratio that changes by the restart threshold restarts with a full step and a short sample")
    func largeChangeRestarts() {
        var window = AdaptiveWindow()
        for _ in 0..<151 { _ = window.record(hits: 500, lookups: 1_000) }
        #expect(window.sampleLength == AdaptiveWindow.longestSample)
        #expect(window.step < 0)
        // Down by 6 points (5 exactly may fall either side of the threshold in binary): the move
        // goes back, up, and the next starts a full step in that direction.
        let moved = window.record(hits: 440, lookups: 1_000)
        #expect(moved)
        #expect(window.step == AdaptiveWindow.fullStep)
        #expect(window.sampleLength == AdaptiveWindow.shortestSample)
        // A change under the threshold (4.5 points) only decays the step.
        _ = window.record(hits: 485, lookups: 1_000)
        #expect(abs(window.step - AdaptiveWindow.fullStep * AdaptiveWindow.decay) < 1e-12)
    }

    @Test("the share stays within 0 … the maximum, and odd samples keep it a number")
    func shareStaysInRange() {
        var window = AdaptiveWindow()
        var random = PowerLossRandom(seed: 3)
        for _ in 0..<10_000 {
            let lookups = Int(random.next() % 3_000)
            // Hits beyond the lookups (a report between the climber's two reads) and none at all.
            let hits = Int(random.next() % UInt64(lookups + 10))
            _ = window.record(hits: hits, lookups: lookups)
            #expect(window.share >= 0 && window.share <= AdaptiveWindow.maximumShare)
            #expect(!window.share.isNaN && !window.step.isNaN)
            #expect(window.sampleLength >= 1 && window.sampleLength <= 10)
        }
        // A step decayed to nothing gives the longest sample, not a division's infinity or NaN.
        window.step = 0
        #expect(window.sampleLength == AdaptiveWindow.longestSample)
    }

    @Test("a sample is at least 1,800 lookups, and a capacity's worth while the step is full")
    func samplePeriod() {
        // A small cache: 100 entries, so the floor decides. 64 reports of 28 lookups are 1,792.
        let small = WindowClimber(countLimit: 100, costBounded: false, shards: 1)
        for _ in 0..<64 { _ = small.report(hits: 28, misses: 0, entries: 100) }
        #expect(small.sampled.samples == 0)
        _ = small.report(hits: 8, misses: 0, entries: 100)
        #expect(small.sampled.samples == 1, "ended at 1,800")
        #expect(small.share == 0, "the first sample shrinks the window")
        // A large cache: 10,000 entries, so a sample is 10,000 lookups at first.
        let large = WindowClimber(countLimit: 10_000, costBounded: false, shards: 4)
        _ = large.report(hits: 9_999, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 0)
        _ = large.report(hits: 1, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 1)
        // The first sample restarts with a full step (from a hit ratio of 0): still one capacity.
        _ = large.report(hits: 9_999, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 1)
        _ = large.report(hits: 1, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 2)
        // Then the step has decayed once: the sample is 1 / 0.98 capacities, 10,205 lookups.
        _ = large.report(hits: 10_204, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 2)
        _ = large.report(hits: 1, misses: 0, entries: 2_500)
        #expect(large.sampled.samples == 3)
        #expect(large.sampled.lookups == 30_205)
        #expect(large.sampled.pending == 0)
    }

    @Test("reports from many threads at once: every sample ends once, with a hit ratio that is a ratio")
    func concurrentReports() {
        let climber = WindowClimber(countLimit: 1_000, costBounded: false, shards: 8)
        // Eight threads, each reporting 2,000 batches of 64 lookups, half of them hits: 1,024,000
        // lookups, so at least 80 samples of at most 10,000 lookups end while others report.
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<2_000 { _ = climber.report(hits: 32, misses: 32, entries: 125) }
        }
        let (share, step, ratio) = (climber.share, climber.step, climber.previousHitRatio)
        // A sample's hits and lookups are taken together, so every sample's hit ratio is exactly
        // one half: after the first (a restart downwards) never a restart, so the step only
        // decayed, and the window stayed shut.
        #expect(ratio == 0.5)
        #expect(share == 0)
        #expect(step < 0 && step > -AdaptiveWindow.fullStep)
        // No lookup lost or counted twice: the samples' lookups and those not yet in one add up.
        let sampled = climber.sampled
        #expect(sampled.lookups + sampled.pending == 8 * 2_000 * 64)
        #expect(sampled.samples >= 80)
    }

    @Test("a restart after the step has decayed to zero still goes the way the hit ratio says")
    func restartFromAZeroStep() {
        for sign in [1.0, -1.0] {
            var window = AdaptiveWindow()
            _ = window.record(hits: 500, lookups: 1_000)
            window.step = sign * 0.0
            // The hit ratio falls by 10 points: the move goes against the (zero) step, and the
            // restart continues in the direction of that move.
            _ = window.record(hits: 400, lookups: 1_000)
            #expect(window.step == -sign * AdaptiveWindow.fullStep, "step was \(sign * 0.0)")
        }
    }

    /// Replays `requests` requests from `key` through one adaptive shard of `capacity` entries
    /// (a lookup, and an insert on a miss) with fixed seeds, so the run is the same every time.
    static func replay(
        capacity: Int, seed: UInt64, requests: Int, _ key: (inout PowerLossRandom, Int) -> Int
    ) -> MemoryShard<Int, Int> {
        var shard = MemoryShard<Int, Int>(
            limits: .init(count: capacity, cost: nil, age: nil), adaptive: true, seed: seed)
        var random = PowerLossRandom(seed: seed)
        var removed = RemovedEntries<Int, Int>()
        for step in 0..<requests {
            let key = key(&random, step)
            let tag = UInt32(truncatingIfNeeded: key &* 0x9E37_79B9)
            if shard.value(forKey: key, tag: tag, now: 0, removed: &removed) == nil {
                shard.insert(key, forKey: key, tag: tag, cost: 0, expires: 0, now: 0, removed: &removed)
            }
            removed = RemovedEntries()
        }
        return shard
    }

    @Test(
        "on a stationary workload the climb settles: the step decays and the sample lengthens",
        arguments: [1, 2] as [UInt64])
    func settlesOnAStationaryWorkload(seed: UInt64) throws {
        // 2,000 entries; requests drawn from 6,000 keys, a third of them three times as often.
        let shard = Self.replay(capacity: 2_000, seed: seed, requests: 600_000) { random, _ in
            let draw = Int(random.next() % 12_000)
            return draw < 6_000 ? draw % 2_000 : draw - 4_000
        }
        let climber = try #require(shard.climber)
        // 600,000 lookups make about a hundred samples of 2,000 lookups and more: had noise
        // restarted the climb in the last ten, the step would be above 0.98^10 of a full one.
        #expect(abs(climber.step) < AdaptiveWindow.fullStep * 0.82, "step \(climber.step)")
        #expect(climber.sampleLength > 1.2, "sample length \(climber.sampleLength)")
    }

    @Test("every shard of a cache follows its one climber, which hears them all")
    func shardsShareOneClimber() {
        // Eight shards of 200 entries; the sliding working set of the single-shard recency test,
        // scaled to the cache (1,200 keys sliding one key every two requests).
        let cache = AdaptivePolicyTests.cache(.adaptive, countLimit: 1_600, shards: 8)
        var random = PowerLossRandom(seed: 8)
        for step in 0..<800_000 {
            let key = step / 2 + Int(random.next() % 1_200)
            if cache.value(forKey: key) == nil { cache.insert(key, forKey: key) }
        }
        let shares = cache.windowShares
        #expect(shares.count == 8)
        // A shard applies a move at its next report: at most the last move or two apart.
        #expect((shares.max() ?? 0) - (shares.min() ?? 0) <= 2 * AdaptiveWindow.fullStep, "shares \(shares)")
        #expect((shares.max() ?? 0) > AdaptiveWindow.initialShare + 0.2, "recency grew the window: \(shares)")
    }
}
