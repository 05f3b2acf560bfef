import Testing

@testable import LMDBCache

@Suite("Frequency sketch")
struct FrequencySketchTests {
    @Test("an estimate never under-counts before a halving, up to the counters' 15")
    func neverUnderCounts() {
        var random = PowerLossRandom(seed: 17)
        var sketch = FrequencySketch(capacity: 512, seed: random.next())
        var truth: [UInt32: Int] = [:]
        // 400 keys, up to 12 sightings each: about 2,400 additions, under the 5,120 that halve.
        for _ in 0..<2_400 {
            let tag = UInt32(truncatingIfNeeded: random.next() % 400)
            sketch.increment(tag)
            truth[tag, default: 0] += 1
        }
        #expect(sketch.additions < sketch.sampleSize, "no halving happened")
        for (tag, count) in truth {
            #expect(sketch.frequency(tag) >= min(count, 15), "tag \(tag) seen \(count) times")
        }
        #expect(sketch.frequency(1_000_000) <= 15)
    }

    @Test("halving ages every count: by hand, and after sampleSize additions")
    func halving() {
        var sketch = FrequencySketch(capacity: 1_024, seed: 42)
        for _ in 0..<12 { sketch.increment(7) }
        #expect(sketch.frequency(7) == 12)
        sketch.halve()
        #expect(sketch.frequency(7) == 6)
        for _ in 0..<20 { sketch.increment(7) }
        #expect(sketch.frequency(7) == 15, "counters saturate at 15")

        // Other keys' sightings bring on a halving by themselves.
        var tag: UInt32 = 100
        var halved = false
        while !halved {
            let before = sketch.additions
            sketch.increment(tag)
            tag += 1
            halved = sketch.additions < before
        }
        #expect(sketch.frequency(7) < 15, "the hot key's count faded")
        #expect(sketch.frequency(7) >= 7)
    }

    @Test("sketches seeded differently put a key's counts in different places")
    func seedsScatterCollisions() {
        var first = FrequencySketch(capacity: 64, seed: 1)
        var second = FrequencySketch(capacity: 64, seed: 2)
        first.increment(99)
        second.increment(99)
        #expect(first.words != second.words)
    }

    @Test("growing a sketch starts an empty table for the larger size", arguments: [1, 2, 3] as [UInt64])
    func growthStartsEmpty(seed: UInt64) {
        var random = PowerLossRandom(seed: seed)
        var sketch = FrequencySketch(capacity: 64, seed: random.next())
        for _ in 0..<300 { sketch.increment(UInt32(truncatingIfNeeded: random.next() % 200)) }
        #expect((0..<200 as Range<UInt32>).contains { sketch.frequency($0) > 0 })
        sketch.ensureCapacity(1_000)
        #expect(sketch.capacity >= 1_000)
        #expect(sketch.words.count >= 1_024)
        #expect(sketch.sampleSize == 10 * sketch.capacity)
        #expect(sketch.additions == 0)
        #expect(sketch.words.allSatisfy { $0 == 0 })
        // It doubles at least, and never past a limit; straight to it once the keys are half of it.
        var limited = FrequencySketch(capacity: 100, seed: 1)
        limited.ensureCapacity(101, limit: 1_000)
        #expect(limited.capacity == 200)
        limited.ensureCapacity(500, limit: 1_000)
        #expect(limited.capacity == 1_000)
        limited.ensureCapacity(2_000, limit: 1_000)
        #expect(limited.capacity == 1_000)
        // Already large enough: nothing changes.
        sketch.increment(7)
        let words = sketch.words
        sketch.ensureCapacity(500)
        #expect(sketch.words == words)
        // An empty sketch (a shard that never evicts) stays empty.
        var empty = FrequencySketch()
        empty.ensureCapacity(1_000)
        #expect(empty.words.isEmpty)
    }

    @Test("a shard bounded by cost alone grows its sketch with its entries")
    func costBoundedShardGrowsItsSketch() {
        var shard = MemoryShard<Int, Int>(limits: .init(count: nil, cost: 1_000_000, age: nil), adaptive: true, seed: 5)
        #expect(shard.sketch.capacity == 64)
        var removed = RemovedEntries<Int, Int>()
        for key in 0..<3_000 {
            shard.insert(key, forKey: key, tag: UInt32(key), cost: 1, expires: 0, now: 0, removed: &removed)
        }
        #expect(shard.count == 3_000)
        // Sized for twice the entries held, growing by doubling.
        #expect(shard.sketch.capacity >= 2 * 3_000)
        #expect(shard.sketch.capacity <= 4 * 3_000)
    }

    @Test("a halving comes after exactly ten additions per key the sketch is sized for")
    func halvingSchedule() {
        var sketch = FrequencySketch(capacity: 1_000, seed: 9)
        #expect(sketch.sampleSize == 10_000)
        // Distinct keys: every increment raises counters (none reaches 15), so each is an addition.
        for tag in 0..<9_999 as Range<UInt32> { sketch.increment(tag) }
        #expect(sketch.additions == 9_999, "no halving yet")
        let before = sketch.frequency(5)
        sketch.increment(1_000_000)
        #expect(sketch.additions < 5_000, "halved at the 10,000th")
        #expect(sketch.frequency(5) == before / 2, "every counter halved, rounding down")
    }

    @Test(
        "a shard's sketch grows with its entries up to its count limit, reaching it by half full",
        arguments: [10, 65, 100, 257, 258, 520, 1_000, 1_025, 30_000] as [Int])
    func countBoundedShardGrowsItsSketch(limit: Int) {
        var shard = MemoryShard<Int, Int>(limits: .init(count: limit, cost: nil, age: nil), adaptive: true, seed: 5)
        #expect(shard.sketch.capacity == max(8, min(limit, 64)), "starts small: no counters for entries not held")
        var removed = RemovedEntries<Int, Int>()
        var reachedLimitAt: Int?
        for key in 0..<(2 * limit) {
            shard.insert(key, forKey: key, tag: UInt32(key), cost: 1, expires: 0, now: 0, removed: &removed)
            #expect(shard.sketch.capacity >= min(2 * shard.count, limit), "sized for twice the entries held")
            #expect(shard.sketch.capacity <= max(8, limit), "never past the limit")
            if reachedLimitAt == nil, shard.sketch.capacity >= limit { reachedLimitAt = shard.count }
            removed = RemovedEntries()
        }
        #expect(shard.sketch.capacity == max(8, limit), "sized for the count limit once full")
        #expect(shard.sketch.sampleSize == 10 * shard.sketch.capacity)
        // The last growth empties the table, so it comes early: a quarter to a half full (as
        // Caffeine sizes its sketch for the maximum at half full), but not before it must: a
        // shard starting at 64 keys grows at its 33rd entry at the earliest.
        let reached = reachedLimitAt ?? .max
        #expect(reached <= limit / 2 + 1, "reached the limit at \(reached)")
        if limit > 128 { #expect(reached >= limit / 4, "reached the limit at \(reached)") }
    }
}
