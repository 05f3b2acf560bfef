import BenchmarkData
import Foundation

// Keys, the shared value, and the pre-generated key sequences every system is driven with.
//
// Everything here is built before any timing starts, so a measured loop only indexes arrays.

/// How keys are drawn for the measured operations.
enum Distribution: String, CaseIterable, Codable, Sendable {
    /// Every key equally likely.
    case uniform
    /// Zipf with exponent 0.99 over the key ranks (YCSB's default skew): a few keys take most of
    /// the traffic.
    case zipf

    /// The Zipf exponent used for ``zipf``.
    static let zipfExponent = 0.99
}

/// Zipf(s) over ranks 0..<n, sampled by binary search in a pre-computed CDF.
///
/// Rank r has probability proportional to 1 / (r + 1)^s. Ranks are mapped to key indices through a
/// seeded random permutation, so the hottest keys are not neighbours ("key-0", "key-1", ...) and
/// do not share whatever locality their insertion order might give them.
struct ZipfSampler {
    /// cdf[r] = P(rank <= r); the last element is exactly 1.
    private let cdf: [Double]
    /// Key index of each rank.
    private let rankToKey: [Int32]

    init(count: Int, exponent: Double, seed: UInt64) {
        precondition(count > 0)
        var cdf = [Double](repeating: 0, count: count)
        var sum = 0.0
        for rank in 0..<count {
            sum += 1.0 / pow(Double(rank + 1), exponent)
            cdf[rank] = sum
        }
        for rank in 0..<count { cdf[rank] /= sum }
        cdf[count - 1] = 1
        self.cdf = cdf
        var random = SplitMix64(seed: seed)
        var permutation = (0..<count).map { Int32($0) }
        permutation.shuffle(using: &random)
        rankToKey = permutation
    }

    /// The key index for a uniform draw `unit` in [0, 1).
    func keyIndex(unit: Double) -> Int32 {
        // First rank whose cumulative probability exceeds `unit`.
        var low = 0
        var high = cdf.count - 1
        while low < high {
            let middle = (low + high) / 2
            if cdf[middle] > unit { high = middle } else { low = middle + 1 }
        }
        return rankToKey[low]
    }

    /// The fraction of draws that land on the `top` most popular keys.
    func share(ofTop top: Int) -> Double {
        top <= 0 ? 0 : cdf[min(top, cdf.count) - 1]
    }
}

/// The data set of a memory-suite run: `entryCount` keys `"key-0"`, `"key-1"`, ..., a 100-byte
/// value of its own for each, and for each distribution one key-index sequence per thread.
struct Workload: Sendable {
    let entryCount: Int
    /// Measured operations per run, split evenly over the run's threads.
    let operationsPerRun: Int
    let keys: [String]
    /// values[i] is stored under keys[i]: distinct arrays, as a service's values are, so that
    /// threads returning different entries do not contend for one reference count (one shared
    /// array made every system's second thread slower than its first). Storing or returning one
    /// costs a retain/release, never a copy of the bytes.
    let values: [[UInt8]]
    /// sequences[distribution][thread]: indices into `keys`, `operationsPerRun` long each (a run
    /// with t threads gives each thread the first `operationsPerRun / t` of its own sequence).
    let sequences: [Distribution: [[Int32]]]
    /// Share of Zipf draws that hit the hottest 1% of keys (printed to show the skew).
    let zipfTopPercentShare: Double

    init(entryCount: Int, operationsPerRun: Int, maxThreads: Int, seed: UInt64 = 0x5EED) {
        self.entryCount = entryCount
        self.operationsPerRun = operationsPerRun
        keys = (0..<entryCount).map { "key-\($0)" }
        values = (0..<entryCount).map { entry in
            (0..<100).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ entry) }
        }
        let zipf = ZipfSampler(count: entryCount, exponent: Distribution.zipfExponent, seed: seed)
        zipfTopPercentShare = zipf.share(ofTop: max(1, entryCount / 100))
        var sequences: [Distribution: [[Int32]]] = [:]
        for distribution in Distribution.allCases {
            sequences[distribution] = (0..<maxThreads).map { thread in
                var random = SplitMix64(seed: seed &+ UInt64(thread + 1) &* 0x1000 &+ (distribution == .zipf ? 1 : 0))
                return (0..<operationsPerRun).map { _ in
                    switch distribution {
                    case .uniform: return Int32(truncatingIfNeeded: Int(random.next() % UInt64(entryCount)))
                    case .zipf: return zipf.keyIndex(unit: random.nextUnit())
                    }
                }
            }
        }
        self.sequences = sequences
    }
}
