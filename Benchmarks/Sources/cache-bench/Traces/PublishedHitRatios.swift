/// Hit ratios published for the traces, to print beside the replays (../shared/traces/README.md,
/// copied into Benchmarks/Traces/README.md with the sources).
enum PublishedHitRatios {
    /// OLTP.lis, count-bounded, from Megiddo and Modha, "ARC: A Self-Tuning, Low Overhead
    /// Replacement Cache", USENIX FAST '03: pages → (LRU, ARC) hit ratio.
    static let oltp: [Int: (lru: Double, arc: Double)] = [
        1_000: (0.3283, 0.3893), 2_000: (0.4247, 0.4608), 5_000: (0.5365, 0.5525), 10_000: (0.6070, 0.6187),
        15_000: (0.6463, 0.6540),
    ]
    /// OLTP.lis's requests once each line is expanded into its pages (the paper's figures are over these).
    static let oltpRequests = 914_145

    /// cloudPhysicsIO.oracleGeneral.bin, byte-bounded, LRU misses from libCacheSim's
    /// test/test_evictionAlgo.c (1a1a11a/libCacheSim at 7c8506470a6c4c94b4e5a2fcf8a78a9873456455,
    /// `test_LRU`'s `miss_cnt_true`, line 45) over 113,872 requests: MiB → misses.
    static let cloudPhysicsLRUMisses: [Int: Int] = [
        128: 93_374, 256: 89_783, 384: 83_572, 512: 81_722, 640: 72_494, 768: 72_104, 896: 71_972, 1_024: 71_704,
    ]
    /// The same trace and sizes, ARC misses from the same file and commit (`test_ARC`'s
    /// `miss_cnt_true`, line 360: `{90252, 85861, 78168, 74297, 67381, 65685, 64439, 64772}`),
    /// libCacheSim's own ARC (`ARC_init`), byte-bounded like its LRU: MiB → misses.
    static let cloudPhysicsARCMisses: [Int: Int] = [
        128: 90_252, 256: 85_861, 384: 78_168, 512: 74_297, 640: 67_381, 768: 65_685, 896: 64_439, 1_024: 64_772,
    ]
    /// The requests libCacheSim counts in that trace (`g_req_cnt_true`, line 8 of the same file):
    /// every record, since none has size 0 (its reader skips those; see ``Trace``).
    static let cloudPhysicsRequests = 113_872

    /// The published LRU hit ratio of `trace` at `capacity` (pages, or bytes), if there is one.
    static func lru(trace name: String, capacity: Int) -> Double? {
        if name.hasPrefix("OLTP") { return oltp[capacity]?.lru }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysics(cloudPhysicsLRUMisses, capacity: capacity) }
        return nil
    }

    /// The published ARC hit ratio of `trace` at `capacity` (pages, or bytes), if there is one.
    static func arc(trace name: String, capacity: Int) -> Double? {
        if name.hasPrefix("OLTP") { return oltp[capacity]?.arc }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysics(cloudPhysicsARCMisses, capacity: capacity) }
        return nil
    }

    /// The number of requests the published figures of `trace` are over, if known: a replay of
    /// another number of requests cannot be compared with them.
    static func requests(trace name: String) -> Int? {
        if name.hasPrefix("OLTP") { return oltpRequests }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysicsRequests }
        return nil
    }

    /// Where ``arc(trace:capacity:)``'s figures for `trace` come from, for the suite's notes.
    static func arcSource(trace name: String) -> String {
        if name.hasPrefix("OLTP") { return "Megiddo and Modha, FAST '03 (the ARC paper)" }
        if name.hasPrefix("cloudPhysicsIO") {
            return "misses of libCacheSim's own ARC in its test/test_evictionAlgo.c (test_ARC), over 113,872 requests"
        }
        return "none"
    }

    /// The capacities with published figures, for a trace replayed without `--sizes`.
    static func sizes(trace name: String) -> [Int]? {
        if name.hasPrefix("OLTP") { return oltp.keys.sorted() }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysicsLRUMisses.keys.sorted().map { $0 << 20 } }
        return nil
    }

    /// Hits over requests from `misses` (MiB → misses) at `capacity` bytes, if it is listed.
    private static func cloudPhysics(_ misses: [Int: Int], capacity: Int) -> Double? {
        guard capacity % (1 << 20) == 0, let missed = misses[capacity >> 20] else { return nil }
        return 1 - Double(missed) / Double(cloudPhysicsRequests)
    }
}
