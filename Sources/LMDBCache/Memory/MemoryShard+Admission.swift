// The `.adaptive` policy's decisions (W-TinyLFU, after Einziger, Friedman and Manes, "TinyLFU: A
// Highly Efficient Cache Admission Policy", ACM TOS 2017, and Caffeine's adaptive window).
//
// Every insert adds to the window's most recently used end. When the window holds more than its
// budget (its share of the limits), its least recently used entry is a *candidate* for the main
// area. While the shard is within its limits the candidate simply joins probation. Otherwise it
// must displace main entries, least recently used first (probation, then protected): it does so
// only if the sketch rates it strictly more popular than each of them, else it is evicted itself.
// It displaces only what it adds (one entry over the count limit, at most its own cost over the
// cost limit, so a candidate costing more than one victim may need several); victims expired or
// idle past the age limit go without a contest (stale entries at the lists' ends go before it).
// A warm candidate (estimate above `warmFrequency`) skips the comparison for one victim one time
// in 128, so keys an attacker floods the sketch with cannot pin the main area. Whatever is still
// over the limits then goes from the main area's LRU ends (the window may have grown), the window's older entries last. The newest entry
// always stays in the window until the next insert: read your writes holds.

/// What a shard's window and protected list may hold under `.adaptive`: shares of its limits.
@usableFromInline
struct SegmentBudgets {
    @usableFromInline var windowCount = Int.max
    @usableFromInline var windowCost = Int128.max
    @usableFromInline var protectedCount = Int.max
    @usableFromInline var protectedCost = Int128.max

    /// The protected list's share of the main area: 80 %, as in the segmented LRU of TinyLFU's
    /// paper and Caffeine (probation keeps a fifth for newcomers to prove themselves).
    @usableFromInline static var protectedShare: Double { 0.8 }

    @inlinable
    init() {}

    @inlinable
    init<Key, Value>(limits: MemoryShard<Key, Value>.Limits, windowShare: Double) {
        if let limit = limits.count {
            windowCount = Self.part(limit, windowShare)
            protectedCount = Self.part(max(0, limit - windowCount), Self.protectedShare)
        }
        if let limit = limits.cost {
            windowCost = Int128(Self.part(limit, windowShare))
            protectedCost = Int128(Self.part(max(0, limit - Self.part(limit, windowShare)), Self.protectedShare))
        }
    }

    /// `share` (0 … 1) of `limit`, rounded down, without trapping for any limit.
    @inlinable
    static func part(_ limit: Int, _ share: Double) -> Int {
        let product = Double(max(0, limit)) * min(max(share, 0), 1)
        return product >= 9.0e18 ? Int(9.0e18) : Int(product)
    }
}

extension MemoryShard {
    /// A warm candidate: one whose estimate is above this may be admitted at random after losing.
    @usableFromInline static var warmFrequency: Int { 5 }

    /// Keys the sketch is sized for at first: 64, or the count limit when lower. It grows with
    /// the entries the shard holds, up to the count limit (``growSketch(entries:)``), so an empty
    /// cache with a large limit does not allocate counters for entries it does not have.
    @inlinable
    static func sketchCapacity(_ limits: Limits) -> Int {
        min(limits.count ?? 64, 64)
    }

    /// Grows the sketch once the shard holds more than half the keys it is sized for, after a
    /// new entry (whose hash tag is `tag`) is stored and before the limits are enforced: to twice
    /// the entries at least (``FrequencySketch/ensureCapacity(_:limit:)``), never past the count
    /// limit. A growth empties the table, so the new entry is counted again in it, once. One
    /// comparison while the sketch is large enough for twice the entries.
    @inlinable
    mutating func growSketch(adding tag: UInt32) {
        guard count > sketch.capacity >> 1 else { return }
        let limit = limits.count ?? .max
        guard sketch.capacity < limit else { return }
        let before = sketch.capacity
        sketch.ensureCapacity(count << 1, limit: limit)
        if sketch.capacity != before { sketch.increment(tag) }
    }

    /// Most lookups a shard counts before it hands them to the cache's ``climber``.
    @inlinable
    static var reportPeriod: Int { 64 }

    /// Fewest lookups a shard counts before it reports: a shard touches the climber's shared
    /// atomic once per eight of its lookups at most, however small it is.
    @inlinable
    static var shortestReportPeriod: Int { 8 }

    /// The window's share of the capacity (`.adaptive`; under `.lru` the window is everything).
    @usableFromInline var windowShare: Double { isAdaptive ? appliedShare : 1 }

    /// Counts a lookup towards the window's adaptation, once the shard is full.
    ///
    /// A shard reports every sixteenth of its entries, within ``shortestReportPeriod`` …
    /// ``reportPeriod`` lookups: with the default shards (64 entries each at least) all shards
    /// together then hold back at most an eighth of the shortest sample, and each applies a moved
    /// share within as many of its own lookups.
    @inlinable
    mutating func sampleLookup(hit: Bool) {
        guard isFull, let climber else { return }
        if hit { sampleHits += 1 } else { sampleMisses += 1 }
        let period = min(Self.reportPeriod, max(count >> 4, Self.shortestReportPeriod))
        guard sampleHits + sampleMisses >= period else { return }
        let share = climber.report(hits: sampleHits, misses: sampleMisses, entries: count)
        sampleHits = 0
        sampleMisses = 0
        guard share != appliedShare else { return }
        appliedShare = share
        budgets = SegmentBudgets(limits: limits, windowShare: share)
    }

    // MARK: Limits

    /// Evicts until the count and cost limits hold, then entries idle past the age limit.
    @inlinable
    mutating func enforceLimits(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        if isAdaptive {
            // Stale entries first: a candidate must not lose to a victim that is gone anyway.
            if hasExpiring || limits.age != nil { removeStaleEnds(now: now, removed: &removed) }
            admitFromWindow(now: now, removed: &removed)
            evictFromMain(now: now, removed: &removed)
            removeIdleEnds(now: now, removed: &removed)
            return
        }
        // `.lru`: least recently used first (the oldest end also holds the longest idle).
        while window.oldest >= 0 {
            let reason: RemovalReason
            if let excess = excessReason {
                reason = excess
            } else if let age = limits.age,
                Self.isIdle(accessed: nodes[Int(window.oldest)].accessed, age: age, now: now)
            {
                reason = .age
            } else {
                break
            }
            evict(window.oldest, reason: reason, now: now, removed: &removed)
        }
    }

    /// True when the window and the protected list hold no more than their budgets (always under
    /// `.lru`, whose budgets are unbounded).
    @inlinable
    var segmentsWithinBudgets: Bool {
        window.count <= budgets.windowCount && window.cost <= budgets.windowCost
            && protected.count <= budgets.protectedCount && protected.cost <= budgets.protectedCost
    }

    /// `.count` while over the count limit, else `.cost` while over the cost limit, else nil.
    @inlinable
    var excessReason: RemovalReason? {
        if let limit = limits.count, count > limit { return .count }
        if let limit = limits.cost, cost > Int128(limit) { return .cost }
        return nil
    }

    /// Removes the node at `index` for `reason`, or as expired when its expiry has passed anyway.
    @inlinable
    mutating func evict(_ index: Int32, reason: RemovalReason, now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        let expires = nodes[Int(index)].expires
        removed.append(remove(index, reason: expires != 0 && now >= expires ? .expired : reason))
    }

    /// The main area's least recently used entry (probation's, else the protected list's); -1
    /// when the main area is empty.
    @inlinable
    var mainVictim: Int32 { probation.oldest >= 0 ? probation.oldest : protected.oldest }

    /// Moves the window's entries beyond its budget, oldest first, into the main area, each
    /// through the admission contest when the shard is over its limits. The newest stays.
    @inlinable
    mutating func admitFromWindow(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        while window.count > 1, window.count > budgets.windowCount || window.cost > budgets.windowCost {
            let candidate = window.oldest
            if excessReason == nil {
                detach(candidate)
                attach(candidate, to: .probation)
            } else {
                isFull = true
                contest(candidate, now: now, removed: &removed)
            }
        }
        demoteProtectedOverflow()
    }

    /// Admits `candidate` (the window's oldest) into probation if it beats every main entry it
    /// must displace to make room for itself, evicting them; else evicts it.
    ///
    /// The candidate displaces only what it adds: one entry while over the count limit, and at
    /// most its own cost while over the cost limit (whatever else is over goes from the main
    /// area's LRU end afterwards); a cost-0 candidate with only the cost over displaces nothing.
    /// A victim expired or idle past the age limit is evicted without comparing frequencies. A
    /// lucky warm candidate skips the comparison for one victim only.
    @inlinable
    mutating func contest(_ candidate: Int32, now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        let excessCount = limits.count.map { count - $0 } ?? 0
        let excessCost = limits.cost.map { cost - Int128($0) } ?? 0
        let neededCount = excessCount > 0 ? 1 : 0
        let neededCost = max(0, min(excessCost, Int128(nodes[Int(candidate)].cost)))
        let frequency = sketch.frequency(nodes[Int(candidate)].tag)
        var lucky = frequency > Self.warmFrequency && nextRandom() & 127 == 0
        var victims = 0
        var freedCount = 0
        var freedCost: Int128 = 0
        var victim = mainVictim
        var admitted = true
        while freedCount < neededCount || freedCost < neededCost {
            // Past the main area's newest entry the candidate would need more room than it has.
            guard victim >= 0 else {
                admitted = false
                break
            }
            let v = Int(victim)
            if staleness(expires: nodes[v].expires, accessed: nodes[v].accessed, now: now) == nil {
                if lucky {
                    lucky = false
                } else if frequency <= sketch.frequency(nodes[v].tag) {
                    admitted = false
                    break
                }
            }
            victims += 1
            freedCount += 1
            freedCost += Int128(nodes[v].cost)
            let next = links[v].newer
            victim = next >= 0 || nodes[v].segment == .protected ? next : protected.oldest
        }
        guard admitted else {
            evict(candidate, reason: excessReason ?? .count, now: now, removed: &removed)
            return
        }
        for _ in 0..<victims {
            let v = Int(mainVictim)
            let stale = staleness(expires: nodes[v].expires, accessed: nodes[v].accessed, now: now)
            evict(mainVictim, reason: stale ?? excessReason ?? .count, now: now, removed: &removed)
        }
        detach(candidate)
        attach(candidate, to: .probation)
    }

    /// Evicts while the shard is over its count or cost limit: the main area's least recently
    /// used entries, then the window's oldest (the newest last, when it alone is too much).
    @inlinable
    mutating func evictFromMain(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        while let reason = excessReason {
            let victim = mainVictim >= 0 ? mainVictim : window.oldest
            guard victim >= 0 else { return }
            isFull = true
            evict(victim, reason: reason, now: now, removed: &removed)
        }
    }

    /// Removes entries expired, or idle past the age limit, from the least recently used end of
    /// each list (the window's newest stays: read your writes).
    @inlinable
    mutating func removeStaleEnds(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        for segment in Segment.evictionOrder {
            while case let index = self[list: segment].oldest, index >= 0,
                segment != .window || window.count > 1,
                let reason = staleness(
                    expires: nodes[Int(index)].expires, accessed: nodes[Int(index)].accessed, now: now)
            {
                evict(index, reason: reason, now: now, removed: &removed)
            }
        }
    }

    /// Removes entries idle past the age limit from the least recently used end of each list.
    @inlinable
    mutating func removeIdleEnds(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        guard let age = limits.age else { return }
        removeIdleEnd(of: .probation, age: age, now: now, removed: &removed)
        removeIdleEnd(of: .protected, age: age, now: now, removed: &removed)
        removeIdleEnd(of: .window, age: age, now: now, removed: &removed)
    }

    @inlinable
    mutating func removeIdleEnd(
        of segment: Segment, age: UInt64, now: UInt64, removed: inout RemovedEntries<Key, Value>
    ) {
        while case let index = self[list: segment].oldest, index >= 0,
            Self.isIdle(accessed: nodes[Int(index)].accessed, age: age, now: now)
        {
            evict(index, reason: .age, now: now, removed: &removed)
        }
    }

    /// The next number of the shard's xorshift generator.
    @inlinable
    mutating func nextRandom() -> UInt64 {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return random
    }
}
