import BenchmarkData

/// `W-TinyLFU (1%)`: the policy before adaptation, exact and single-threaded: Einziger, Friedman and
/// Manes's W-TinyLFU ("TinyLFU: A Highly Efficient Cache Admission Policy", ACM TOS 2017) with the
/// static window of Caffeine's releases before its adaptive one (2.x up to 2.6), written from the
/// paper and Caffeine's design notes, to show what the adaptation adds to the same structure.
///
/// Three LRU lists: the window (1 % of the capacity, rounded up, after Caffeine: the capacity less
/// 99 % of it), and the main area's probation and protected segments (protected: 80 % of the main
/// area). Every request counts its key in a frequency sketch, once. A miss joins the window; what
/// the window holds past its share, from its least recently used end (the new entry too, when it
/// alone is too large), moves to probation as a candidate, and while the cache is over its
/// capacity the newest candidate meets probation's least recently used entry (the victim), once:
/// the candidate stays if the sketch counts it more often, else it goes; a warm candidate (counted
/// more than 5 times) that loses is admitted all the same one time in 128 (Caffeine's guard
/// against keys flooded into the sketch). With no candidate left, victims go without a contest. A
/// hit in probation moves the entry to protected, which demotes its least recently used entries
/// to probation while it is over its share. No doorkeeper (Caffeine has none).
///
/// The sketch: a count-min sketch of 4-bit counters, four per key (each raised unless saturated),
/// 16 counters per slot of a power-of-two table of at least the cache's capacity in entries, and
/// a reset after ten times that many counted requests (requests that raised a counter): every
/// counter halved, and the count of requests halved less a quarter of the odd counters, as
/// Caffeine 2.x does. A byte-bounded cache has no entry capacity: its table is sized by the
/// entries it holds, starting at 16, and made anew (counts forgotten, as Caffeine's
/// `ensureCapacity` does) whenever the cache holds more entries than the table has slots. Hashes
/// use seeded constants and the one random draw a seeded generator, so a replay gives the same
/// figure every run.
///
/// Bounded by total cost, like ``ExactLRU`` (count-bounded traces give every object cost 1); an
/// object costing more than the capacity is not kept.
struct ExactWTinyLFU {
    /// Which list each slot is on.
    private enum Segment: UInt8 {
        case window = 0, probation, protected
    }

    /// The main area's share of the capacity and the protected segment's of the main area (Caffeine's).
    static let mainShare = 0.99
    static let protectedShare = 0.80
    /// A candidate counted more often than this may be admitted at random after losing (Caffeine's).
    static let warmFrequency: UInt8 = 5

    private var index: [UInt64: Int32] = [:]
    private var keys: [UInt64] = []
    private var costs: [Int] = []
    private var segments: [UInt8] = []
    private var freeSlots: [Int32] = []
    private var window = SlotList()
    private var probation = SlotList()
    private var protected = SlotList()
    private var sketch: Sketch
    private var random = SplitMix64(seed: 0x5EED_0F71_4F1F)
    /// The candidates just moved from the window to probation, oldest first.
    private var candidates: [Int32] = []
    let capacity: Int
    let windowCapacity: Int
    let protectedCapacity: Int
    /// Whether the capacity is in bytes: the sketch then grows with the entries held.
    let byteBounded: Bool

    init(capacity: Int) {
        self.init(capacity: capacity, byteBounded: false)
    }

    init(capacity: Int, byteBounded: Bool) {
        self.capacity = capacity
        self.byteBounded = byteBounded
        windowCapacity = capacity - Int(Double(capacity) * Self.mainShare)
        protectedCapacity = Int(Double(capacity - windowCapacity) * Self.protectedShare)
        sketch = Sketch(entries: byteBounded ? 16 : capacity)
    }

    private var totalCost: Int { window.cost + probation.cost + protected.cost }

    /// Looks `key` up, counting it in the sketch: a hit moves it up its list (from probation to
    /// protected), a miss inserts it into the window with `cost` and evicts until the total fits.
    /// Returns whether it was a hit.
    mutating func access(_ key: UInt64, cost: Int) -> Bool {
        sketch.increment(key)
        if let slot = index[key] {
            hit(slot)
            return true
        }
        guard cost <= capacity else { return false }
        let slot = newSlot(key, cost: cost)
        push(slot, on: .window)
        while window.cost > windowCapacity {
            let oldest = window.oldest
            window.remove(oldest, cost: costs[Int(oldest)])
            push(oldest, on: .probation)
            candidates.append(oldest)
        }
        while totalCost > capacity {
            evictOne()
        }
        candidates.removeAll(keepingCapacity: true)
        if byteBounded && index.count > sketch.slots { sketch = Sketch(entries: index.count) }
        return false
    }

    private mutating func hit(_ slot: Int32) {
        let cost = costs[Int(slot)]
        switch Segment(rawValue: segments[Int(slot)]) {
        case .window:
            window.moveToNewest(slot, cost: cost)
        case .probation:
            probation.remove(slot, cost: cost)
            push(slot, on: .protected)
            while protected.cost > protectedCapacity, protected.oldest != slot {
                let demoted = protected.oldest
                protected.remove(demoted, cost: costs[Int(demoted)])
                push(demoted, on: .probation)
            }
        case .protected, nil:
            protected.moveToNewest(slot, cost: cost)
        }
    }

    /// Evicts one entry: the loser of the newest candidate (moved from the window by this request)
    /// against probation's least recently used entry; without a candidate left, or when the
    /// victim is the candidate itself, the victim (from probation, else protected, else the window).
    private mutating func evictOne() {
        let victim: Int32
        let from: Segment
        if !probation.isEmpty {
            (victim, from) = (probation.oldest, .probation)
        } else if !protected.isEmpty {
            (victim, from) = (protected.oldest, .protected)
        } else {
            (victim, from) = (window.oldest, .window)
        }
        if from == .probation, let candidate = candidates.last, candidate != victim {
            // Each candidate meets one victim (Caffeine 2.x): a winner stays whatever follows.
            candidates.removeLast()
            if admits(candidate, over: victim) {
                evict(victim, from: .probation)
                if let at = candidates.firstIndex(of: victim) { candidates.remove(at: at) }
            } else {
                evict(candidate, from: .probation)
            }
            return
        }
        evict(victim, from: from)
        if let at = candidates.firstIndex(of: victim) { candidates.remove(at: at) }
    }

    /// TinyLFU's admission: the candidate if the sketch counts it more often than the victim; a
    /// warm candidate that does not, one time in 128.
    private mutating func admits(_ candidate: Int32, over victim: Int32) -> Bool {
        let candidateFrequency = sketch.frequency(keys[Int(candidate)])
        let victimFrequency = sketch.frequency(keys[Int(victim)])
        if candidateFrequency > victimFrequency { return true }
        if candidateFrequency <= Self.warmFrequency { return false }
        return random.next() & 127 == 0
    }

    private mutating func evict(_ slot: Int32, from segment: Segment) {
        let cost = costs[Int(slot)]
        switch segment {
        case .window: window.remove(slot, cost: cost)
        case .probation: probation.remove(slot, cost: cost)
        case .protected: protected.remove(slot, cost: cost)
        }
        index[keys[Int(slot)]] = nil
        freeSlots.append(slot)
    }

    private mutating func push(_ slot: Int32, on segment: Segment) {
        segments[Int(slot)] = segment.rawValue
        switch segment {
        case .window: window.push(slot, cost: costs[Int(slot)])
        case .probation: probation.push(slot, cost: costs[Int(slot)])
        case .protected: protected.push(slot, cost: costs[Int(slot)])
        }
    }

    private mutating func newSlot(_ key: UInt64, cost: Int) -> Int32 {
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            keys[Int(slot)] = key
            costs[Int(slot)] = cost
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            costs.append(cost)
            segments.append(0)
        }
        index[key] = slot
        return slot
    }

    /// The count-min sketch of 4-bit counters (one byte each here, capped at 15).
    private struct Sketch {
        private var counters: [UInt8]
        private let mask: Int
        private let sampleSize: Int
        private var additions = 0
        /// The table's slots (16 counters each): a power of two.
        let slots: Int

        private static let seeds: [UInt64] = [
            0x97CB_3127_E1A4_8A3B, 0xC6A4_A793_5BD1_E995, 0x9E37_79B9_7F4A_7C15, 0xD6E8_FEB8_6659_FD93,
        ]

        /// A table of at least `entries` slots, reset after ten times `entries` counted requests.
        init(entries: Int) {
            let entries = max(entries, 1)
            var slots = 1
            while slots < entries { slots <<= 1 }
            self.slots = slots
            counters = [UInt8](repeating: 0, count: slots * 16)
            mask = slots * 16 - 1
            let (sample, overflow) = entries.multipliedReportingOverflow(by: 10)
            sampleSize = overflow ? .max : sample
        }

        private func position(_ key: UInt64, _ row: Int) -> Int {
            Int(truncatingIfNeeded: SplitMix64.mix(key ^ Self.seeds[row])) & mask
        }

        mutating func increment(_ key: UInt64) {
            var added = false
            for row in 0..<4 {
                let at = position(key, row)
                if counters[at] < 15 {
                    counters[at] += 1
                    added = true
                }
            }
            guard added else { return }
            additions += 1
            if additions >= sampleSize {
                var odd = 0
                for at in counters.indices {
                    odd += Int(counters[at] & 1)
                    counters[at] >>= 1
                }
                additions = max(0, (additions >> 1) - (odd >> 2))
            }
        }

        func frequency(_ key: UInt64) -> UInt8 {
            (0..<4).map { counters[position(key, $0)] }.min() ?? 0
        }
    }
}
