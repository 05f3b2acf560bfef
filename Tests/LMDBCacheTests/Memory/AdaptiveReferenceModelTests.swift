import Foundation
import Testing

@testable import LMDBCache

/// One ``MemoryShard`` against ``ReferenceShard``, a plain re-statement of its policy, step by
/// step (``ShardModelHarness``): seeded random operation sequences, and a slice of a real trace.
@Suite("Memory tier: one shard against a reference model of its policy")
struct AdaptiveReferenceModelTests {
    /// A random workload's shape.
    struct Workload: CustomTestStringConvertible, Sendable {
        var name: String
        var count: Int?
        var cost: Int?
        /// Milliseconds.
        var age: UInt64?
        var adaptive = true
        /// Keys 0 ..< keys, skewed towards the low ones.
        var keys = 400
        /// Steps in 1,000 that start a scan of fresh keys (20 … 200 long).
        var scans = 0
        /// Costs 0 … maxCost, plus a few over the cost limit.
        var maxCost = 0
        /// Inserts in 100 with an expiry (a few already past).
        var expiring = 0
        /// Tags of only a few bits: keys share tags, in the slot table and the sketch.
        var fewTags = false
        var steps = 6_000
        /// Decisions the run must have taken at least once with each seed (what it is there to
        /// check; the runs are deterministic, so this is a statement about them, not a chance).
        var exercises: [ReferenceShard.Event] = []

        var testDescription: String { name }
    }

    static let workloads: [Workload] = [
        Workload(
            name: "count 64, skewed reads and writes", count: 64, maxCost: 20,
            exercises: [.contest, .admitted, .rejected, .promoted, .demoted, .shareMoved, .skippedMove]),
        Workload(
            name: "count 64, skewed with scans", count: 64, scans: 8, maxCost: 20,
            exercises: [.contest, .admitted, .rejected, .promoted, .shareMoved]),
        Workload(
            name: "count 200, flat key space with scans", count: 200, keys: 2_000, scans: 4,
            exercises: [.admittedFree, .contest, .admitted, .rejected, .shareMoved]),
        Workload(
            name: "cost 1,000, random costs", cost: 1_000, maxCost: 120,
            exercises: [.contest, .severalVictims, .lucky, .evictedFromMain, .shareMoved]),
        Workload(
            name: "cost 1,000, random costs with scans", cost: 1_000, scans: 6, maxCost: 60,
            exercises: [.contest, .severalVictims, .evictedFromMain, .shareMoved]),
        Workload(
            name: "count 40 and cost 600, random costs", count: 40, cost: 600, maxCost: 80,
            exercises: [.contest, .severalVictims, .demoted, .evictedFromMain, .shareMoved]),
        Workload(
            name: "count 64, expiry and an age limit", count: 64, age: 3_000, maxCost: 20, expiring: 20,
            exercises: [.contest, .admitted, .rejected, .shareMoved]),
        Workload(
            name: "cost 800, expiry and an age limit", cost: 800, age: 2_000, scans: 4, maxCost: 90, expiring: 25,
            exercises: [.contest, .staleVictim, .severalVictims, .shareMoved]),
        Workload(
            name: "count 50, tags shared by many keys", count: 50, maxCost: 10, expiring: 5, fewTags: true,
            exercises: [.contest, .lucky, .shareMoved]),
        Workload(
            name: "count 1, cost 50", count: 1, cost: 50, keys: 20, maxCost: 30, expiring: 10,
            exercises: [.noRoom, .lucky]),
        Workload(
            name: ".lru, count 64 and cost 900", count: 64, cost: 900, age: 3_000, adaptive: false, maxCost: 40,
            expiring: 10, exercises: [.skippedMove]),
    ]

    @Test(
        "seeded random operations: the shard decides as the model does at every step",
        arguments: workloads, Array(1...UInt64(SoakSettings.referenceSeeds)))
    func randomSequences(workload: Workload, seed: UInt64) {
        let harness = Self.run(workload, seed: seed)
        #expect(harness.steps > workload.steps / 2, "the run went on")
        for event in workload.exercises {
            #expect(harness.model.events[event, default: 0] > 0, "the run exercised \(event)")
        }
        let reasons = harness.model.removalsByReason
        if workload.count != nil { #expect(reasons[.count, default: 0] > 0) }
        if workload.cost != nil { #expect(reasons[.cost, default: 0] > 0) }
        if workload.age != nil { #expect(reasons[.age, default: 0] > 0) }
        if workload.expiring > 0 { #expect(reasons[.expired, default: 0] > 0) }
    }

    /// Runs `workload` with `seed` through a harness and returns it.
    @discardableResult
    static func run(_ workload: Workload, seed: UInt64) -> ShardModelHarness {
        var random = PowerLossRandom(seed: seed &* 0x9E37_79B9 &+ UInt64(workload.name.count))
        var harness = ShardModelHarness(
            "\(workload.name), seed \(seed)", count: workload.count, cost: workload.cost, age: workload.age,
            adaptive: workload.adaptive, seed: 0x5EED_0000 &+ seed,
            tag: workload.fewTags ? { UInt32(truncatingIfNeeded: $0 & 0x3F) } : { UInt32(truncatingIfNeeded: $0) })
        var scanLeft = 0
        var scanKey = 1_000_000
        var value = 0
        func draw(_ bound: Int) -> Int { Int(random.next() % UInt64(max(bound, 1))) }
        func key() -> Int {
            if scanLeft > 0 {
                scanLeft -= 1
                scanKey += 1
                return scanKey
            }
            if draw(1_000) < workload.scans { scanLeft = 20 + draw(180) }
            // Zipf-ish: a key below a random bound, itself random: low keys are drawn most.
            return draw(1 + draw(workload.keys))
        }
        func cost() -> Int {
            switch draw(100) {
            case 0 where workload.cost != nil: return workload.cost! + 1 + draw(10)
            case 1..<6: return 0
            default: return draw(workload.maxCost + 1)
            }
        }
        func expiry() -> UInt64 {
            let roll = draw(100)
            if roll < 2 { return harness.now }  // already past: never returned
            return roll < 2 + workload.expiring ? harness.now + 1 + UInt64(draw(4_000)) : 0
        }
        for _ in 0..<workload.steps where !harness.failed {
            switch draw(100) {
            case 0..<70: break
            case 70..<97: harness.advance(by: UInt64(draw(60)))
            case 97..<99: harness.advance(by: UInt64(draw(Int(workload.age ?? 5_000))))
            default: harness.rewind(by: UInt64(draw(30)))
            }
            value += 1
            let roll = draw(1_000)
            switch roll {
            case 0..<430: harness.fill(key(), cost: cost(), expires: expiry())
            case 430..<630: harness.insert(key(), value: value, cost: cost(), expires: expiry())
            case 630..<680: harness.remove(key())
            case 680..<700: harness.lookup(key(), counting: false)
            case 700..<720: harness.contains(key())
            case 720..<730: harness.recordAccess(key())
            case 730..<992: harness.lookup(key())
            case 992: harness.trim(count: draw((workload.count ?? 100) + 1))
            case 993: harness.trim(cost: draw((workload.cost ?? 1_000) + 1))
            case 994: harness.trim(accessedBefore: harness.now - UInt64(draw(3_000)))
            case 995: harness.trim(count: draw(80), cost: draw(1_200), accessedBefore: harness.now - 500)
            case 996, 997: harness.removeExpired()
            case 998: harness.schedulerPass(idleBefore: workload.age.map { harness.now - min(harness.now, $0) })
            default: if draw(5) == 0 { harness.removeAll() } else { harness.lookup(key()) }
            }
        }
        return harness
    }

    // MARK: A real trace

    /// The first 20,000 requests of the OLTP trace of the ARC paper (N. Megiddo and D. S. Modha,
    /// "ARC: A Self-Tuning, Low Overhead Replacement Cache", USENIX FAST '03), the first 20,000
    /// lines of Benchmarks/Traces/OLTP.lis.gz verbatim (Tests/LMDBCacheTests/Resources/README.md):
    /// lines `start count ignored request`, each the pages `start ..< start + count`.
    static let oltpPages: [Int] = {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Resources/OLTP-first-20000.lis")
        guard let text = try? String(contentsOf: url, encoding: .utf8) else { return [] }
        var pages: [Int] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 2, let start = Int(fields[0]), let count = Int(fields[1]) else { continue }
            pages += start..<(start + count)
        }
        return pages
    }()

    @Test(
        "a slice of the OLTP trace (lookup, insert on a miss): the shard decides as the model does at every step",
        arguments: [(64, nil), (256, nil), (nil, 300), (150, 400)] as [(Int?, Int?)])
    func oltpSlice(count: Int?, cost: Int?) throws {
        let pages = Self.oltpPages
        try #require(pages.count == 20_000, "the excerpt has its 20,000 requests")
        var harness = ShardModelHarness(
            "OLTP, count \(count as Any), cost \(cost as Any)", count: count, cost: cost, age: nil, seed: 0x0171)
        // Page costs 1 … 3 (a page number's remainder), so that a cost limit counts more than entries.
        for page in pages where !harness.failed {
            harness.fill(page, cost: cost == nil ? 1 : 1 + page % 3)
        }
        #expect(harness.steps > 20_000)
        for event in [ReferenceShard.Event.contest, .admitted, .rejected, .promoted, .demoted] {
            #expect(harness.model.events[event, default: 0] > 0, "the replay exercised \(event)")
        }
        if count == nil { #expect(harness.model.events[.sketchGrown, default: 0] > 0, "the sketch grew") }
        #expect(
            harness.model.removalsByReason[.count, default: 0] + harness.model.removalsByReason[.cost, default: 0]
                > 1_000,
            "the replay evicts")
        #expect(harness.model.share != AdaptiveWindow.initialShare, "the window's share moved: the climber was checked")
    }

    // MARK: Stale misses

    @Test("a lookup that finds its entry expired is a miss whose fill counts once in the sketch")
    func staleMissFillCountsOnce() {
        // lastMissTag: "the hash tag of the last key missed, until an insert of it (a fill of that
        // miss) or the next miss". A lookup that finds its entry expired removes it and misses.
        var harness = ShardModelHarness("stale miss", count: 10, cost: nil, age: nil, seed: 7)
        harness.insert(1, value: 1, cost: 0, expires: harness.now + 10)
        harness.advance(by: 10)
        harness.lookup(1)  // expired: removed, a miss (the sketch: 2)
        harness.insert(1, value: 2, cost: 0)  // its fill
        #expect(harness.shard.sketch.frequency(1) == 2)
    }

    @Test("a lookup that finds its entry expired is the next miss: an earlier miss's key counts when inserted")
    func staleMissEndsTheEarlierMiss() {
        var harness = ShardModelHarness("stale miss", count: 10, cost: nil, age: nil, seed: 7)
        harness.insert(1, value: 1, cost: 0, expires: harness.now + 10)
        harness.advance(by: 10)
        harness.lookup(5)  // absent: the last miss is 5
        harness.lookup(1)  // expired: the next miss
        harness.insert(5, value: 5, cost: 0)
        #expect(harness.shard.sketch.frequency(5) == 2)
    }
}
