/// The write sequence `cache-test-helper churn` performs, so a test can tell what a store must hold
/// after the helper confirmed a flush.
///
/// Step `i` sets `c<i>`; every 5th step also overwrites `c<i-1>` with a second value; every 7th
/// step removes `c<i-2>`. Step `i` touches no key below `c<i-2>`, so once steps `0..<n` are
/// flushed, every key below `c<n-2>` has its final state, ``expectedValue(forKeyIndex:)``.
public enum ChurnSequence {
    public static func key(_ index: Int) -> String { "c\(index)" }

    /// Sizes cycle through small, medium compressible, and large random values.
    public static func firstValue(_ index: Int) -> [UInt8] {
        switch index % 4 {
        case 0: return sampleBytes(count: 16, compressible: true, seed: UInt64(index))
        case 1: return sampleBytes(count: 3_000, compressible: true, seed: UInt64(index))
        case 2: return sampleBytes(count: 4_096, compressible: false, seed: UInt64(index))
        default: return sampleBytes(count: 700, compressible: false, seed: UInt64(index))
        }
    }

    public static func secondValue(_ index: Int) -> [UInt8] {
        sampleBytes(count: 1_500 + index % 300, compressible: true, seed: UInt64(index) &+ 1_000_003)
    }

    public enum Step {
        case set(key: String, value: [UInt8])
        case remove(key: String)
    }

    /// The operations of step `i`, in order.
    public static func steps(_ i: Int) -> [Step] {
        var steps: [Step] = [.set(key: key(i), value: firstValue(i))]
        if i % 5 == 0 && i >= 1 { steps.append(.set(key: key(i - 1), value: secondValue(i - 1))) }
        if i % 7 == 0 && i >= 2 { steps.append(.remove(key: key(i - 2))) }
        return steps
    }

    /// What key `c<index>` holds once the steps after it are done: nil when removed.
    public static func expectedValue(forKeyIndex index: Int) -> [UInt8]? {
        if (index + 2) % 7 == 0 { return nil }
        if (index + 1) % 5 == 0 { return secondValue(index) }
        return firstValue(index)
    }
}
