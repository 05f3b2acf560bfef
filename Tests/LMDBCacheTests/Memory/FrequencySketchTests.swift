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
}
