@testable import LMDBCache

/// A deliberately plain re-statement of one ``MemoryShard``'s policy (`.lru`, and `.adaptive`'s
/// W-TinyLFU with its hill-climbed window), written from the policy's description in the source
/// comments (MemoryShard.swift, MemoryShard+Admission.swift, +Lists, +Trimming and
/// AdaptiveWindow.swift), not from its code paths: arrays of keys for the three LRU lists, a
/// dictionary for the entries, and every decision spelled out step by step. It shares with the
/// shard only the production ``FrequencySketch`` (seeded alike) and the policy's constants, so a
/// comparison checks decisions, not constants.
///
/// Keys and values are `Int`; a key's hash tag is given with each operation, as the shard's is.
/// Times are milliseconds.
struct ReferenceShard {
    /// The shard's three lists, in ``Segment/evictionOrder``'s terms.
    enum List: Int, CaseIterable {
        case window, probation, protected

        var segment: Segment {
            switch self {
            case .window: .window
            case .probation: .probation
            case .protected: .protected
            }
        }
    }

    struct Entry {
        var value: Int
        var cost: Int
        /// Last read or write.
        var accessed: UInt64
        /// 0: never.
        var expires: UInt64
        var tag: UInt32
        var list: List
        /// The shard-wide count of moves to a list's most recently used end when this entry last
        /// made one (documented on `MemoryShard.Node.moved`).
        var moved: UInt32
    }

    /// Where the model departs on purpose from what the documentation says, to follow the shard
    /// in a known divergence (see AdaptiveReferenceModelTests' known-issue tests): without it the
    /// long random runs would stop at the first occurrence and check nothing after it.
    enum Event: String, CaseIterable {
        case admittedFree, contest, admitted, rejected, lucky, staleVictim, severalVictims, noRoom, evictedFromMain
        case evictedFromWindow, demoted, promoted, shareMoved, sketchGrown, skippedMove
    }

    let countLimit: Int?
    let costLimit: Int?
    let ageLimit: UInt64?
    /// `.adaptive` with a count or cost limit.
    let adaptive: Bool

    private(set) var entries: [Int: Entry] = [:]
    /// Oldest (least recently used) first, indexed by `List.rawValue`.
    private(set) var lists: [[Int]] = [[], [], []]
    private(set) var totalCost: Int128 = 0
    /// Each list's cost, indexed by `List.rawValue`.
    private(set) var listCosts: [Int128] = [0, 0, 0]
    private(set) var sketch: FrequencySketch
    private(set) var climber: ClimberModel
    /// The window's share the lists' budgets are computed from.
    private(set) var share = AdaptiveWindow.initialShare
    /// Whether a count or cost limit has ever forced an eviction (the window adapts only after).
    private(set) var full = false
    private(set) var hits = 0
    private(set) var misses = 0
    private(set) var removalsByReason: [RemovalReason: Int] = [:]
    /// How often each of the policy's decisions was taken, by name: what a run exercised.
    private(set) var events: [Event: Int] = [:]
    /// Removals since the last ``takeRemovals()``, in order.
    private(set) var removed: [(key: Int, value: Int, reason: RemovalReason)] = []

    private var moves: UInt32 = 0
    private var lastMiss: UInt32?
    private var random: UInt64
    private var sampleHits = 0
    private var sampleMisses = 0

    init(count: Int?, cost: Int?, age: UInt64?, adaptive: Bool, seed: UInt64) {
        countLimit = count
        costLimit = cost
        ageLimit = age
        self.adaptive = adaptive && (count != nil || cost != nil)
        // The sketch starts sized for 64 keys, or the count limit when lower.
        sketch = self.adaptive ? FrequencySketch(capacity: min(count ?? 64, 64), seed: seed) : FrequencySketch()
        climber = ClimberModel(countLimit: count, costBounded: cost != nil)
        random = seed | 1
    }

    var count: Int { entries.count }

    func keys(in list: List) -> [Int] { lists[list.rawValue] }

    func listCost(_ list: List) -> Int128 { listCosts[list.rawValue] }

    mutating func takeRemovals() -> [(key: Int, value: Int, reason: RemovalReason)] {
        defer { removed = [] }
        return removed
    }

    // MARK: Budgets

    /// `share` of `limit`, rounded down.
    static func part(_ limit: Int, _ share: Double) -> Int {
        Int(Double(limit) * share)
    }

    /// The window's budget: its share of each limit.
    var windowBudget: (count: Int, cost: Int128) {
        (
            countLimit.map { Self.part($0, share) } ?? .max,
            costLimit.map { Int128(Self.part($0, share)) } ?? .max
        )
    }

    /// The protected list's budget: 80 % of what the window leaves of each limit.
    var protectedBudget: (count: Int, cost: Int128) {
        let window = windowBudget
        let protectedCount = countLimit.map { Self.part($0 - window.count, SegmentBudgets.protectedShare) }
        let protectedCost = costLimit.map { Self.part($0 - Int(window.cost), SegmentBudgets.protectedShare) }
        return (protectedCount ?? .max, protectedCost.map { Int128($0) } ?? .max)
    }

    /// The reason the shard is over a limit, count first; nil within both.
    var excess: RemovalReason? {
        if let countLimit, count > countLimit { return .count }
        if let costLimit, totalCost > Int128(costLimit) { return .cost }
        return nil
    }

    // MARK: Operations

    /// A lookup: the live value, made the most recently used of its list (a hit in probation
    /// moves to protected). With `counting` false: no hit or miss, no access for the sketch.
    mutating func value(forKey key: Int, tag: UInt32, now: UInt64, counting: Bool = true) -> Int? {
        let counted = adaptive && counting
        if counted { sketch.increment(tag) }
        guard let entry = entries[key] else {
            if counting { misses += 1 }
            if counted { countLookup(hit: false) }
            // An uncounted look repeats a counted one: its fill is that access too.
            if adaptive { lastMiss = tag }
            return nil
        }
        if let reason = staleness(entry, now: now) {
            drop(key, reason)
            if counting { misses += 1 }
            if counted { countLookup(hit: false) }
            if adaptive { lastMiss = tag }
            return nil
        }
        entries[key]!.accessed = now
        use(key)
        if counting { hits += 1 }
        if counted { countLookup(hit: true) }
        return entry.value
    }

    func contains(_ key: Int, now: UInt64) -> Bool {
        entries[key].map { staleness($0, now: now) == nil } ?? false
    }

    /// A value read elsewhere (from disk) and not stored: an access for the sketch.
    /// A disk hit whose promotion was skipped: the fill of the last miss if it is that key's
    /// (counted at the miss), else an access of its own.
    mutating func recordAccess(tag: UInt32) {
        guard adaptive else { return }
        if lastMiss == tag {
            lastMiss = nil
        } else {
            sketch.increment(tag)
        }
    }

    mutating func insert(_ value: Int, forKey key: Int, tag: UInt32, cost: Int, expires: UInt64, now: UInt64) {
        if adaptive {
            // The fill of the last miss was counted at the miss.
            if lastMiss == tag {
                lastMiss = nil
            } else {
                sketch.increment(tag)
            }
        }
        if let costLimit, cost > costLimit {
            // Never fits: the old value goes as replaced, the new one at once for cost.
            if entries[key] != nil { drop(key, .replaced) }
            note(key, value, .cost)
            return
        }
        if var entry = entries[key] {
            let old = entry.value
            let costlier = cost > entry.cost
            totalCost += Int128(cost) - Int128(entry.cost)
            listCosts[entry.list.rawValue] += Int128(cost) - Int128(entry.cost)
            entry.value = value
            entry.cost = cost
            entry.accessed = now
            entry.expires = expires
            entries[key] = entry
            if adaptive && costlier {
                // Starts over as the window's newest.
                unlist(key)
                push(key, to: .window)
            } else {
                use(key)
            }
            note(key, old, .replaced)
        } else {
            entries[key] = Entry(
                value: value, cost: cost, accessed: now, expires: expires, tag: tag, list: .window, moved: 0)
            totalCost += Int128(cost)
            push(key, to: .window)
            if adaptive, 2 * count > sketch.capacity, sketch.capacity < countLimit ?? .max {
                // A new entry: once the shard holds more than half the keys the sketch is sized
                // for, it asks for twice its entries (never past the count limit). A growth
                // empties the table, and the new key is counted in it once.
                let before = sketch.capacity
                sketch.ensureCapacity(2 * count, limit: countLimit ?? .max)
                if sketch.capacity != before {
                    sketch.increment(tag)
                    events[.sketchGrown, default: 0] += 1
                }
            }
        }
        enforceLimits(now: now)
    }

    /// Removes the entry; its value only if it was live (an expired or idle one goes unreturned).
    mutating func removeValue(forKey key: Int, now: UInt64) -> Int? {
        guard let entry = entries[key] else { return nil }
        let live = contains(key, now: now)
        drop(key, .explicit)
        return live ? entry.value : nil
    }

    /// Everything goes, as explicit removals, probation's oldest first, then protected's, then the
    /// window's; the sketch, the window's share and the rest of the policy's state stay.
    mutating func removeAll() {
        for list in [List.probation, .protected, .window] {
            for key in lists[list.rawValue] { note(key, entries[key]!.value, .explicit) }
        }
        entries = [:]
        lists = [[], [], []]
        listCosts = [0, 0, 0]
        totalCost = 0
    }

    /// `trim(toCount:)`, `trim(toCost:)` and `trim(toAge:)` of one shard: expired entries (the
    /// window's, then protected's, then probation's, each oldest first), then least recently used
    /// ones while over a target (under `.adaptive` the main area's first, probation before
    /// protected, then the window's), then (`.adaptive`: anywhere, `.lru`: from the LRU end) those
    /// last used before `accessedBefore`.
    mutating func trim(count countTarget: Int?, cost costTarget: Int?, accessedBefore: UInt64?, now: UInt64) {
        removeExpired(now: now)
        func over() -> Bool {
            (countTarget.map { count > $0 } ?? false) || (costTarget.map { totalCost > Int128($0) } ?? false)
        }
        if adaptive {
            while over(), let victim = mainOldest ?? lists[List.window.rawValue].first {
                let byCount = countTarget.map { count > $0 } ?? false
                drop(victim, byCount ? .count : .cost)
            }
            if let accessedBefore {
                for (key, entry) in entries.sorted(by: { $0.key < $1.key }) where entry.accessed < accessedBefore {
                    drop(key, .age)
                }
            }
            return
        }
        while let oldest = lists[List.window.rawValue].first {
            if let countTarget, count > countTarget {
                drop(oldest, .count)
            } else if let costTarget, totalCost > Int128(costTarget) {
                drop(oldest, .cost)
            } else if let accessedBefore, entries[oldest]!.accessed < accessedBefore {
                drop(oldest, .age)
            } else {
                break
            }
        }
    }

    mutating func removeExpired(now: UInt64) {
        for list in [List.window, .protected, .probation] {
            for key in lists[list.rawValue] where isExpired(entries[key]!, now: now) {
                drop(key, .expired)
            }
        }
    }

    /// One pass of the trimming scheduler over this shard: expired entries (and under `.adaptive`
    /// those last used before `idleBefore`) wherever they are, then entries last used before
    /// `idleBefore` from the lists' LRU ends (the window's first). The removals' order is that
    /// of the shard's node slots, which the model does not know: compare them as a set.
    mutating func schedulerPass(now: UInt64, idleBefore: UInt64?) {
        for (key, entry) in entries.sorted(by: { $0.key < $1.key }) {
            if isExpired(entry, now: now) {
                drop(key, .expired)
            } else if adaptive, let idleBefore, entry.accessed < idleBefore {
                drop(key, .age)
            }
        }
        guard let idleBefore else { return }
        while true {
            let ends = [List.window, .probation, .protected].compactMap { lists[$0.rawValue].first }
            guard let idle = ends.first(where: { entries[$0]!.accessed < idleBefore }) else { return }
            drop(idle, .age)
        }
    }

    // MARK: The policy

    func isExpired(_ entry: Entry, now: UInt64) -> Bool {
        entry.expires != 0 && now >= entry.expires
    }

    /// Idle for the age limit or longer (a clock gone back: no time passed).
    func isIdle(_ entry: Entry, now: UInt64) -> Bool {
        guard let ageLimit else { return false }
        return now > entry.accessed && now - entry.accessed >= ageLimit
    }

    /// Expired before idle.
    func staleness(_ entry: Entry, now: UInt64) -> RemovalReason? {
        if isExpired(entry, now: now) { return .expired }
        if isIdle(entry, now: now) { return .age }
        return nil
    }

    var mainOldest: Int? { lists[List.probation.rawValue].first ?? lists[List.protected.rawValue].first }

    /// The shard's limits after an insert: stale ends, then the window's overflow through
    /// admission, then whatever is still over from the main area (then the window), then idle ends.
    mutating func enforceLimits(now: UInt64) {
        guard adaptive else {
            while let oldest = lists[List.window.rawValue].first {
                if let reason = excess {
                    evict(oldest, reason, now: now)
                } else if isIdle(entries[oldest]!, now: now) {
                    evict(oldest, .age, now: now)
                } else {
                    break
                }
            }
            return
        }
        // 1. Entries expired or idle at the lists' LRU ends, probation's, protected's, then the
        // window's (its newest stays).
        for list in [List.probation, .protected, .window] {
            while let oldest = lists[list.rawValue].first,
                list != .window || lists[list.rawValue].count > 1,
                let reason = staleness(entries[oldest]!, now: now)
            {
                evict(oldest, reason, now: now)
            }
        }
        // 2. The window's overflow, oldest first, its newest never.
        while lists[List.window.rawValue].count > 1,
            lists[List.window.rawValue].count > windowBudget.count || listCost(.window) > windowBudget.cost
        {
            let candidate = lists[List.window.rawValue][0]
            if excess == nil {
                events[.admittedFree, default: 0] += 1
                move(candidate, to: .probation)
            } else {
                events[.contest, default: 0] += 1
                full = true
                admitOrReject(candidate, now: now)
            }
        }
        demoteProtectedOverflow()
        // 3. Still over: the main area's LRU entries, then the window's.
        while let reason = excess, let victim = mainOldest ?? lists[List.window.rawValue].first {
            events[mainOldest == nil ? .evictedFromWindow : .evictedFromMain, default: 0] += 1
            full = true
            evict(victim, reason, now: now)
        }
        // 4. Idle entries at the LRU ends.
        if ageLimit != nil {
            for list in [List.probation, .protected, .window] {
                while let oldest = lists[list.rawValue].first, isIdle(entries[oldest]!, now: now) {
                    evict(oldest, .age, now: now)
                }
            }
        }
    }

    /// The admission contest: the candidate must make room for itself (one entry while over the
    /// count limit, at most its own cost of the cost overflow) from the main area's LRU end,
    /// beating each live victim by the sketch's estimate (a lucky warm candidate skips one
    /// comparison); stale victims go without a contest.
    mutating func admitOrReject(_ candidate: Int, now: UInt64) {
        let needsOne = countLimit.map { count > $0 } ?? false
        let costOver = costLimit.map { totalCost - Int128($0) } ?? 0
        let costNeeded = max(0, min(costOver, Int128(entries[candidate]!.cost)))
        let estimate = sketch.frequency(entries[candidate]!.tag)
        var lucky = false
        if estimate > MemoryShard<Int, Int>.warmFrequency {
            lucky = nextRandom() % 128 == 0
        }
        if lucky { events[.lucky, default: 0] += 1 }
        let main = lists[List.probation.rawValue] + lists[List.protected.rawValue]
        var victims: [Int] = []
        var freedCost: Int128 = 0
        var admitted = true
        while (needsOne && victims.isEmpty) || freedCost < costNeeded {
            guard victims.count < main.count else {
                events[.noRoom, default: 0] += 1
                admitted = false
                break
            }
            let victim = main[victims.count]
            if staleness(entries[victim]!, now: now) != nil {
                events[.staleVictim, default: 0] += 1
            } else {
                if lucky {
                    lucky = false
                } else if estimate <= sketch.frequency(entries[victim]!.tag) {
                    admitted = false
                    break
                }
            }
            victims.append(victim)
            freedCost += Int128(entries[victim]!.cost)
        }
        guard admitted else {
            events[.rejected, default: 0] += 1
            evict(candidate, excess ?? .count, now: now)
            return
        }
        events[.admitted, default: 0] += 1
        if victims.count > 1 { events[.severalVictims, default: 0] += 1 }
        for victim in victims {
            evict(victim, staleness(entries[victim]!, now: now) ?? excess ?? .count, now: now)
        }
        move(candidate, to: .probation)
    }

    /// Protected entries beyond the protected budget go back to probation, oldest first.
    mutating func demoteProtectedOverflow() {
        while let oldest = lists[List.protected.rawValue].first,
            lists[List.protected.rawValue].count > protectedBudget.count
                || listCost(.protected) > protectedBudget.cost
        {
            events[.demoted, default: 0] += 1
            move(oldest, to: .probation)
        }
    }

    /// A use of `key` (a hit, or an overwrite costing no more): from probation to protected;
    /// elsewhere to its list's most recently used end, unless it is the newest already or fewer
    /// moves than an eighth of its list have happened since its own.
    mutating func use(_ key: Int) {
        let entry = entries[key]!
        if entry.list == .probation {
            events[.promoted, default: 0] += 1
            move(key, to: .protected)
            demoteProtectedOverflow()
            return
        }
        let list = lists[entry.list.rawValue]
        if list.last == key { return }
        if Int(moves &- entry.moved) < list.count / 8 {
            events[.skippedMove, default: 0] += 1
            return
        }
        move(key, to: entry.list)
    }

    /// Counts a lookup for the window's climber once the shard is full; every sixteenth of the
    /// entries held, within 8 … 64 lookups, the climber hears them and may move the share.
    mutating func countLookup(hit: Bool) {
        guard full else { return }
        if hit { sampleHits += 1 } else { sampleMisses += 1 }
        let period = min(64, max(count / 16, 8))
        guard sampleHits + sampleMisses >= period else { return }
        let previous = share
        share = climber.report(hits: sampleHits, misses: sampleMisses, entries: count)
        if share != previous { events[.shareMoved, default: 0] += 1 }
        sampleHits = 0
        sampleMisses = 0
    }

    /// Removes `key` for `reason`, or as expired when its expiry has passed anyway.
    mutating func evict(_ key: Int, _ reason: RemovalReason, now: UInt64) {
        drop(key, isExpired(entries[key]!, now: now) ? .expired : reason)
    }

    mutating func drop(_ key: Int, _ reason: RemovalReason) {
        let entry = entries[key]!
        unlist(key)
        entries[key] = nil
        totalCost -= Int128(entry.cost)
        note(key, entry.value, reason)
    }

    mutating func note(_ key: Int, _ value: Int, _ reason: RemovalReason) {
        removed.append((key, value, reason))
        removalsByReason[reason, default: 0] += 1
    }

    mutating func move(_ key: Int, to list: List) {
        unlist(key)
        push(key, to: list)
    }

    mutating func unlist(_ key: Int) {
        let list = entries[key]!.list.rawValue
        lists[list].remove(at: lists[list].firstIndex(of: key)!)
        listCosts[list] -= Int128(entries[key]!.cost)
    }

    mutating func push(_ key: Int, to list: List) {
        moves &+= 1
        entries[key]!.moved = moves
        entries[key]!.list = list
        lists[list.rawValue].append(key)
        listCosts[list.rawValue] += Int128(entries[key]!.cost)
    }

    /// Marsaglia's xorshift64 (13, 7, 17), seeded with the sketch's seed with its low bit set.
    mutating func nextRandom() -> UInt64 {
        random ^= random << 13
        random ^= random >> 7
        random ^= random << 17
        return random
    }
}

/// The window's hill climber for a one-shard cache, restated from AdaptiveWindow's documentation:
/// a sample lasts `fullStep / |step|` capacities of lookups, within 1 … 10 (one while the step is
/// full), and at least 1,800 lookups, the capacity being the count limit or, with a cost limit, the entries held (at least 32)
/// when fewer; the first sample sets a baseline; after each later one the share moves by the step
/// (on while the hit ratio rose or held, back while it fell), clamped to 0 … `maximumShare`; the
/// step decays by `decay`, or restarts at a full step in the direction taken when the hit ratio
/// changed by `restartThreshold` or more.
struct ClimberModel {
    let countLimit: Int?
    let costBounded: Bool
    private(set) var share = AdaptiveWindow.initialShare
    private(set) var step = -AdaptiveWindow.fullStep
    private var hits = 0
    private var lookups = 0
    private var baseline = 0.0

    init(countLimit: Int?, costBounded: Bool) {
        self.countLimit = countLimit
        self.costBounded = costBounded
    }

    /// The current sample's length in capacities.
    var sampleLength: Double { min(max(AdaptiveWindow.fullStep / abs(step), 1), 10) }

    mutating func report(hits: Int, misses: Int, entries: Int) -> Double {
        var capacity = countLimit ?? .max
        if costBounded { capacity = min(capacity, max(entries, 32)) }
        self.hits += hits
        lookups += hits + misses
        guard Double(lookups) >= max(Double(max(capacity, 1)) * sampleLength, 1_800) else { return share }
        let ratio = Double(self.hits) / Double(lookups)
        self.hits = 0
        lookups = 0
        let change = ratio - baseline
        let move = change >= 0 ? step : -step
        if abs(change) >= AdaptiveWindow.restartThreshold {
            step = move.sign == .plus ? AdaptiveWindow.fullStep : -AdaptiveWindow.fullStep
        } else {
            step = move * AdaptiveWindow.decay
        }
        share = min(max(share + move, 0), AdaptiveWindow.maximumShare)
        baseline = ratio
        return share
    }
}
