/// `ARC`: Megiddo and Modha's Adaptive Replacement Cache ("ARC: A Self-Tuning, Low Overhead
/// Replacement Cache", USENIX FAST '03, Fig. 4), exact and single-threaded, written from the
/// paper's description, to replay traces beside LMDBCache and to check the replay against the
/// paper's own ARC figures.
///
/// Four LRU lists, most recently used first: `T1` (resident, seen once recently), `T2` (resident,
/// seen at least twice), and the ghost lists `B1` and `B2` (keys and costs only, of entries
/// recently evicted from `T1` and `T2`). `p` is the target size of `T1`, which a hit in `B1`
/// raises and a hit in `B2` lowers. `REPLACE` moves the least recently used entry of `T1` to `B1`
/// while `T1` is over its target (or at it, for a hit in `B2`), else that of `T2` to `B2`.
///
/// Bounded by total cost, like ``ExactLRU``. With every cost 1 (count-bounded, the paper's
/// setting) it is the paper's algorithm exactly: `|L1| = c` is `T1 + B1 + 1 > c`, `|T1| < c` is
/// `B1` not empty, `|L1| + |L2| = 2c` is `T1 + B1 + T2 + B2 ≥ 2c`. With costs in bytes
/// (byte-bounded, libCacheSim's oracleGeneral traces) every size is in bytes and those same
/// conditions are the byte-bounded generalization libCacheSim's ARC uses (`ARC.c`'s
/// `_ARC_evict_miss_on_all_queues`, 1a1a11a/libCacheSim, read, not copied, at commit
/// 7e3f484311937c1fabd7bbe04e4c0167d9217119; replayed this way, cloudPhysicsIO gives the ARC misses
/// libCacheSim's tests assert at 7c8506470a6c4c94b4e5a2fcf8a78a9873456455 exactly), and from
/// libCacheSim's ARC come three more rules:
///
/// - a miss evicts (case IV, or REPLACE after a ghost hit) until the object fits, not once;
/// - REPLACE takes from `T1` when `T2` is empty, whatever `p` says (with sizes in bytes, `T1` can
///   be under its target while `T2` is empty; count-bounded this only guards the edge `p = c`);
/// - `p` moves on a ghost hit by the paper's ratio `max(|B2| / |B1|, 1)` (or `max(|B1| / |B2|, 1)`)
///   of the lists' byte sizes, added to `p` as it is, so in bytes: one byte where the paper moves
///   one page. libCacheSim does the same (`delta` in `ARC_find`), and keeps `p` a real number
///   as here (the paper does not say whether it is one).
///
/// An object costing more than the capacity is not cached and leaves no ghost (a ghost hit on a key
/// whose cost has grown past the capacity adapts `p` and forgets the ghost, as libCacheSim does).
/// A hit keeps the cost the entry was inserted with, as ``ExactLRU`` does.
struct ExactARC {
    /// The paper's four lists.
    enum List: Int {
        case t1 = 0, t2, b1, b2
    }

    private var index: [UInt64: Int32] = [:]
    private var keys: [UInt64] = []
    private var costs: [Int] = []
    /// Which ``List`` each slot is on (its raw value).
    private var lists: [UInt8] = []
    private var previous: [Int32] = []
    private var next: [Int32] = []
    private var freeSlots: [Int32] = []
    /// Each list's most and least recently used slot, by ``List`` raw value; -1 when empty.
    private var heads: [Int32] = [-1, -1, -1, -1]
    private var tails: [Int32] = [-1, -1, -1, -1]
    /// Each list's total cost, by ``List`` raw value.
    private var sizes = [0, 0, 0, 0]
    /// The paper's `p`, the target total cost of `T1`: 0 ... capacity.
    private(set) var target = 0.0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The total cost of `list`.
    func size(of list: List) -> Int { sizes[list.rawValue] }

    /// Looks `key` up: a hit (in `T1` or `T2`) becomes the most recently used entry of `T2`; a miss
    /// brings the object in with `cost` (into `T2` if its key was in a ghost list, adapting `p`,
    /// else into `T1`), evicting as ARC says until it fits. Returns whether it was a hit.
    mutating func access(_ key: UInt64, cost: Int) -> Bool {
        if let slot = index[key] {
            let list = List(rawValue: Int(lists[Int(slot)]))!
            switch list {
            case .t1, .t2:
                // Case I: a hit, to the MRU end of T2.
                unlink(slot)
                pushFront(slot, on: .t2)
                return true
            case .b1:
                // Case II: B1 was too short; grow T1's target, then make room and fetch into T2.
                let delta = max(Double(size(of: .b2)) / Double(size(of: .b1)), 1)
                target = min(target + delta, Double(capacity))
                drop(slot)
                guard cost <= capacity else { return false }
                makeRoom(for: cost, hitInB2: false)
            case .b2:
                // Case III: B2 was too short; shrink T1's target.
                let delta = max(Double(size(of: .b1)) / Double(size(of: .b2)), 1)
                target = max(target - delta, 0)
                drop(slot)
                guard cost <= capacity else { return false }
                makeRoom(for: cost, hitInB2: true)
            }
            insert(key, cost: cost, on: .t2)
            return false
        }
        // Case IV: in none of the lists.
        guard cost <= capacity else { return false }
        while resident + cost > capacity {
            if size(of: .t1) + size(of: .b1) + cost > capacity {
                // A: L1 = T1 ∪ B1 is full.
                if size(of: .b1) > 0 {
                    drop(tails[List.b1.rawValue])
                    replace(hitInB2: false)
                } else {
                    // T1 alone fills L1: its LRU entry leaves with no ghost.
                    drop(tails[List.t1.rawValue])
                }
            } else {
                // B: L1 has room; the directory (L1 ∪ L2) holds at most twice the capacity.
                if resident + size(of: .b1) + size(of: .b2) >= 2 * capacity, size(of: .b2) > 0 {
                    drop(tails[List.b2.rawValue])
                }
                replace(hitInB2: false)
            }
        }
        insert(key, cost: cost, on: .t1)
        return false
    }

    /// The resident total cost: T1 and T2.
    private var resident: Int { size(of: .t1) + size(of: .t2) }

    /// REPLACE until `cost` more fits (once, count-bounded, with the cache full).
    private mutating func makeRoom(for cost: Int, hitInB2: Bool) {
        while resident + cost > capacity, resident > 0 {
            replace(hitInB2: hitInB2)
        }
    }

    /// The paper's REPLACE(x, p): demotes the LRU entry of T1 to B1 when T1 is over its target (or
    /// at it and x was found in B2), or when T2 is empty; else that of T2 to B2.
    private mutating func replace(hitInB2: Bool) {
        let t1 = Double(size(of: .t1))
        let fromT1 =
            size(of: .t1) > 0 && (t1 > target || (hitInB2 && t1 == target)) || size(of: .t2) == 0
        let slot = tails[(fromT1 ? List.t1 : List.t2).rawValue]
        unlink(slot)
        pushFront(slot, on: fromT1 ? .b1 : .b2)
    }

    /// Adds `key` at the MRU end of `list`.
    private mutating func insert(_ key: UInt64, cost: Int, on list: List) {
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            keys[Int(slot)] = key
            costs[Int(slot)] = cost
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            costs.append(cost)
            lists.append(0)
            previous.append(-1)
            next.append(-1)
        }
        index[key] = slot
        pushFront(slot, on: list)
    }

    /// Forgets `slot` altogether (from whichever list it is on).
    private mutating func drop(_ slot: Int32) {
        unlink(slot)
        index[keys[Int(slot)]] = nil
        freeSlots.append(slot)
    }

    private mutating func unlink(_ slot: Int32) {
        let list = Int(lists[Int(slot)])
        let before = previous[Int(slot)]
        let after = next[Int(slot)]
        if before >= 0 { next[Int(before)] = after } else { heads[list] = after }
        if after >= 0 { previous[Int(after)] = before } else { tails[list] = before }
        sizes[list] -= costs[Int(slot)]
    }

    private mutating func pushFront(_ slot: Int32, on list: List) {
        let list = list.rawValue
        lists[Int(slot)] = UInt8(list)
        previous[Int(slot)] = -1
        next[Int(slot)] = heads[list]
        if heads[list] >= 0 { previous[Int(heads[list])] = slot }
        heads[list] = slot
        if tails[list] < 0 { tails[list] = slot }
        sizes[list] += costs[Int(slot)]
    }
}
