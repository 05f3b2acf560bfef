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

    /// OLTP.lis, count-bounded, LIRS misses of libCacheSim's own LIRS: not published, but replayed for
    /// this harness on 2026-11-30 (UTC) with the PyPI package libcachesim 0.3.5 (the Python binding over
    /// libCacheSim's C code; its CPython 3.11 x86_64 wheel), the trace expanded as ``Trace`` expands it
    /// (914,145 requests of 186,880 pages), each size on a fresh cache:
    ///
    ///     cache = libcachesim.LIRS(cache_size=pages)   # no parameters
    ///     req = libcachesim.Request()
    ///     req.obj_size = 1                             # the size is in objects: each page costs 1
    ///     for page in trace: req.obj_id = page; misses += not cache.get(req)
    ///
    /// The same replay gives the ARC paper's LRU figures above, and libCacheSim's published LRU, ARC,
    /// LIRS and S3-FIFO misses of cloudPhysicsIO below, exactly. pages → misses.
    static let oltpLibCacheSimLIRSMisses: [Int: Int] = [
        1_000: 598_066, 2_000: 526_116, 5_000: 433_091, 10_000: 362_670, 15_000: 329_299,
    ]
    /// The same, S3-FIFO misses of libCacheSim's own S3-FIFO at its defaults, given explicitly:
    /// `cache = libcachesim.S3FIFO(cache_size=pages, small_size_ratio=0.1, ghost_size_ratio=0.9,
    /// move_to_main_threshold=2)`: pages → misses.
    static let oltpLibCacheSimS3FIFOMisses: [Int: Int] = [
        1_000: 540_669, 2_000: 484_187, 5_000: 404_521, 10_000: 341_108, 15_000: 310_977,
    ]

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
    /// The same trace and sizes, LIRS misses from the same file and commit (`test_LIRS`'s
    /// `miss_cnt_true`, line 466: `{89819, 79237, 73143, 70363, 68405, 64494, 58640, 53924}`),
    /// libCacheSim's own LIRS (`create_test_cache("LIRS", cc_params, reader, NULL)`: no parameters
    /// given, its defaults), byte-bounded like its LRU: MiB → misses. As hit ratios: 21.12 … 52.65 %.
    static let cloudPhysicsLIRSMisses: [Int: Int] = [
        128: 89_819, 256: 79_237, 384: 73_143, 512: 70_363, 640: 68_405, 768: 64_494, 896: 58_640, 1_024: 53_924,
    ]
    /// The same trace and sizes, S3-FIFO misses from the same file and commit (`test_S3FIFO`'s
    /// `miss_cnt_true`, line 428: `{90117, 80915, 75060, 72191, 69815, 65542, 60799, 56045}`),
    /// libCacheSim's own S3-FIFO (`create_test_cache("S3-FIFO", cc_params, reader, NULL)`: its
    /// defaults), byte-bounded like its LRU: MiB → misses. As hit ratios: 20.86 … 50.78 %.
    static let cloudPhysicsS3FIFOMisses: [Int: Int] = [
        128: 90_117, 256: 80_915, 384: 75_060, 512: 72_191, 640: 69_815, 768: 65_542, 896: 60_799, 1_024: 56_045,
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

    /// libCacheSim's LIRS hit ratio of `trace` at `capacity` (pages, or bytes), if there is one: for
    /// OLTP the replay through libcachesim 0.3.5 above, for cloudPhysicsIO the published test figure.
    static func lirs(trace name: String, capacity: Int) -> Double? {
        if name.hasPrefix("OLTP") { return oltpLibCacheSim(oltpLibCacheSimLIRSMisses, capacity: capacity) }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysics(cloudPhysicsLIRSMisses, capacity: capacity) }
        return nil
    }

    /// libCacheSim's S3-FIFO hit ratio of `trace` at `capacity`, as ``lirs(trace:capacity:)``.
    static func s3fifo(trace name: String, capacity: Int) -> Double? {
        if name.hasPrefix("OLTP") { return oltpLibCacheSim(oltpLibCacheSimS3FIFOMisses, capacity: capacity) }
        if name.hasPrefix("cloudPhysicsIO") { return cloudPhysics(cloudPhysicsS3FIFOMisses, capacity: capacity) }
        return nil
    }

    /// Whether the replayed LIRS and S3-FIFO must land on ``lirs(trace:capacity:)`` and
    /// ``s3fifo(trace:capacity:)`` (within 0.05 points): OLTP, count-bounded (the paper's setting).
    /// cloudPhysicsIO's byte-bounded figures are only compared, as its ARC figures are (libcachesim
    /// 0.3.5 gives them exactly; ``ExactS3FIFO`` does too, ``ExactLIRS`` within 352 misses).
    static func checksLibCacheSim(trace name: String) -> Bool { name.hasPrefix("OLTP") }

    /// Published hit ratios of `trace` at `capacity`, shown as rows of their own (not replayed), as
    /// (system, hit ratio), in the order the table shows them: LIRS and S3-FIFO for cloudPhysicsIO
    /// (libCacheSim's test figures); none for other traces.
    static func others(trace name: String, capacity: Int) -> [(system: String, hitRatio: Double)] {
        guard name.hasPrefix("cloudPhysicsIO") else { return [] }
        return [("LIRS", cloudPhysicsLIRSMisses), ("S3-FIFO", cloudPhysicsS3FIFOMisses)].compactMap { system, misses in
            cloudPhysics(misses, capacity: capacity).map { (system, $0) }
        }
    }

    /// Where ``others(trace:capacity:)``'s figures for `trace` come from, for the suite's notes.
    static func othersSource(trace name: String) -> String? {
        guard name.hasPrefix("cloudPhysicsIO") else { return nil }
        return "misses of libCacheSim's own LIRS and S3-FIFO (default parameters) in its test/test_evictionAlgo.c "
            + "(test_LIRS line 466, test_S3FIFO line 428, 1a1a11a/libCacheSim at "
            + "7c8506470a6c4c94b4e5a2fcf8a78a9873456455), over 113,872 requests"
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
            return "misses of libCacheSim's own ARC in its test/test_evictionAlgo.c (test_ARC line 360, "
                + "1a1a11a/libCacheSim at 7c8506470a6c4c94b4e5a2fcf8a78a9873456455), over 113,872 requests"
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

    /// Hits over requests from `misses` (pages → misses) at `capacity` pages, if it is listed.
    private static func oltpLibCacheSim(_ misses: [Int: Int], capacity: Int) -> Double? {
        misses[capacity].map { 1 - Double($0) / Double(oltpRequests) }
    }
}
