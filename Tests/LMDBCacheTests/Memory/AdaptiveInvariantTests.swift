import Testing

@testable import LMDBCache

/// ``ShardInvariants`` after every step of random operations on one shard, under both policies
/// and with count, cost and age limits; keys share hash tags, so the slot table's probe chains
/// and backward-shift removals are exercised hard. Also checks what a caller sees: a read gives
/// the value last written or nil, and a value read right after its insert is that value.
@Suite("Memory tier: a shard's structure holds after every step (random stress)")
struct AdaptiveInvariantTests {
    struct Limits: CustomTestStringConvertible, Sendable {
        var count: Int?
        var cost: Int?
        var age: UInt64?
        var testDescription: String { "count \(count as Any), cost \(cost as Any), age \(age as Any)" }
    }

    static let limits: [Limits] = [
        Limits(count: 100),
        Limits(cost: 2_000),
        Limits(count: 60, cost: 1_500, age: 500),
        Limits(count: 3, cost: 40, age: 200),
        Limits(age: 300),
    ]

    @Test(
        "links, lists, totals, free list and slot table stay consistent; reads give the last write",
        arguments: [true, false], limits)
    func stress(adaptive: Bool, limits: Limits) {
        var random = PowerLossRandom(seed: 0x57E5 &+ UInt64(limits.count ?? 0) &+ UInt64(limits.cost ?? 0))
        var shard = MemoryShard<Int, Int>(
            limits: .init(count: limits.count, cost: limits.cost, age: limits.age), adaptive: adaptive, seed: 99)
        // Eight tags for 300 keys: long probe chains.
        func tag(_ key: Int) -> UInt32 { UInt32(key & 7) &* 0x9E37_79B9 }
        var written: [Int: Int] = [:]
        var now: UInt64 = 1_000_000
        var failures = 0
        for step in 0..<12_000 where failures == 0 {
            now += random.next() % 4 == 0 ? random.next() % 40 : 0
            let key = Int(random.next() % 300)
            var removed = RemovedEntries<Int, Int>()
            var note = ""
            switch random.next() % 10 {
            case 0..<4:
                let cost = Int(random.next() % 120)
                let expires = random.next() % 10 == 0 ? now + random.next() % 300 : 0
                // Some expiring entries are kept past the time they stop being served (staleIfError).
                let servedUntil = expires > now + 1 && random.next() % 2 == 0 ? now + (expires - now) / 2 : 0
                shard.insert(
                    step, forKey: key, tag: tag(key), cost: cost, expires: expires, servedUntil: servedUntil, now: now,
                    removed: &removed)
                written[key] = step
                if expires == 0, cost <= limits.cost ?? .max, (limits.count ?? 1) > 0 {
                    let read = shard.value(forKey: key, tag: tag(key), now: now, removed: &removed)
                    if read != step { note = "read \(read as Any) right after inserting \(step)" }
                }
            case 4:
                _ = shard.removeValue(forKey: key, tag: tag(key), now: now, removed: &removed)
            case 5 where random.next() % 50 == 0:
                shard.trim(
                    count: Int(random.next() % 80), cost: Int(random.next() % 2_000), accessedBefore: now - 200,
                    now: now, removed: &removed)
            case 6 where random.next() % 200 == 0:
                shard.removeAll(removed: &removed)
            case 7 where random.next() % 20 == 0:
                shard.removeExpired(inSlots: 0..<shard.nodeSlots, now: now, idleBefore: now - 250, removed: &removed)
                _ = shard.removeIdle(accessedBefore: now - 250, limit: 10, removed: &removed)
            case 8:
                var removedByStaleRead = RemovedEntries<Int, Int>()
                let found = shard.entry(
                    forKey: key, tag: tag(key), now: now, removed: &removedByStaleRead, counting: true, stale: true)
                if let found, found.value != written[key] {
                    note = "found \(found.value), last written \(written[key] as Any)"
                }
                removedByStaleRead.forEach { entry in written[entry.key] = nil }
            default:
                let read = shard.value(forKey: key, tag: tag(key), now: now, removed: &removed)
                if let read, read != written[key] { note = "read \(read), last written \(written[key] as Any)" }
            }
            removed.forEach { entry in
                if entry.reason != .replaced { written[entry.key] = nil }
            }
            let problems = ShardInvariants.problems(shard, lookingUp: step % 8 == 0) + (note.isEmpty ? [] : [note])
            if !problems.isEmpty {
                failures += 1
                Issue.record("step \(step), key \(key): \(problems.joined(separator: "; "))")
            }
        }
        // The run evicted for each limit it has (a run that never filled would prove little).
        let removals = shard.statistics.removals
        if limits.count != nil { #expect(removals[RemovalReason.count.index] > 0) }
        if limits.cost != nil { #expect(removals[RemovalReason.cost.index] > 0) }
        if limits.age != nil { #expect(removals[RemovalReason.age.index] > 0) }
        #expect(removals[RemovalReason.expired.index] > 0)
    }

    @Test("the invariant check finds a broken link, a lost node, a wrong total and a stale slot")
    func checkerFindsDamage() {
        var shard = MemoryShard<Int, Int>(limits: .init(count: 10, cost: nil, age: nil), adaptive: true, seed: 1)
        var removed = RemovedEntries<Int, Int>()
        for key in 0..<8 {
            shard.insert(key, forKey: key, tag: UInt32(key), cost: 1, expires: 0, now: 0, removed: &removed)
        }
        _ = shard.value(forKey: 2, tag: 2, now: 0, removed: &removed)  // into protected
        _ = shard.removeValue(forKey: 5, tag: 5, now: 0, removed: &removed)  // a free node
        #expect(ShardInvariants.problems(shard).isEmpty)

        var damaged = shard
        let middle = Int(damaged.links[Int(damaged.probation.oldest)].newer)
        damaged.links[middle].older = -1
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a link that does not point back")

        damaged = shard
        damaged.probation.count += 1
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a list's count")

        damaged = shard
        damaged.cost += 1
        #expect(!ShardInvariants.problems(damaged).isEmpty, "the shard's cost")

        damaged = shard
        damaged.firstFree = -1
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a node neither listed nor free")

        damaged = shard
        damaged.nodes[Int(damaged.protected.oldest)].segment = .window
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a node's list")

        damaged = shard
        damaged.table.remove(tag: 3, node: damaged.find(3, tag: 3)!)
        damaged.table.count += 1
        #expect(!ShardInvariants.problems(damaged).isEmpty, "a key the table lost")
    }
}
