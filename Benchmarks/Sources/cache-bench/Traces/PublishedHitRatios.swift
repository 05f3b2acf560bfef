/// Hit ratios published for the traces, to print beside the replays (../shared/traces/README.md,
/// copied into Benchmarks/Traces/README.md with the sources).
enum PublishedHitRatios {
    /// OLTP.lis, count-bounded, from Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead
    /// Replacement Cache", USENIX FAST '03: pages → (LRU, ARC) hit ratio.
    static let oltp: [Int: (lru: Double, arc: Double)] = [
        1_000: (0.3283, 0.3893), 2_000: (0.4247, 0.4608), 5_000: (0.5365, 0.5525), 10_000: (0.6070, 0.6187),
        15_000: (0.6463, 0.6540),
    ]

    /// cloudPhysicsIO.oracleGeneral.bin, byte-bounded, LRU misses from libCacheSim's
    /// test/test_evictionAlgo.c over 113,872 requests: MiB → misses.
    static let cloudPhysicsLRUMisses: [Int: Int] = [
        128: 93_374, 256: 89_783, 384: 83_572, 512: 81_722, 640: 72_494, 768: 72_104, 896: 71_972, 1_024: 71_704,
    ]
    static let cloudPhysicsRequests = 113_872

    /// The published LRU hit ratio of `trace` at `capacity` (pages, or bytes), if there is one.
    static func lru(trace name: String, capacity: Int) -> Double? {
        if name.hasPrefix("OLTP") { return oltp[capacity]?.lru }
        if name.hasPrefix("cloudPhysicsIO"), capacity % (1 << 20) == 0,
            let misses = cloudPhysicsLRUMisses[capacity >> 20]
        {
            return 1 - Double(misses) / Double(cloudPhysicsRequests)
        }
        return nil
    }

    /// The capacities with published figures, for a trace replayed without `--sizes`.
    static func sizes(trace name: String) -> [Int]? {
        if name.hasPrefix("OLTP") { return oltp.keys.sorted() }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysicsLRUMisses.keys.sorted().map { $0 << 20 } }
        return nil
    }
}
