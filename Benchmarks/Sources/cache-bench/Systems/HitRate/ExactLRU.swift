/// `LRU`: an exact least-recently-used cache bounded by total cost, single-threaded and as plain
/// as possible (a dictionary of indices into arrays forming a doubly linked list), to check the
/// replay against the published LRU figures and to show how far a sharded cache's approximate
/// LRU lands from exact LRU.
struct ExactLRU {
    private var index: [UInt64: Int32] = [:]
    private var keys: [UInt64] = []
    private var costs: [Int] = []
    private var previous: [Int32] = []
    private var next: [Int32] = []
    private var freeSlots: [Int32] = []
    /// Most recently used, least recently used; -1 when empty.
    private var head: Int32 = -1
    private var tail: Int32 = -1
    private var totalCost = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Looks `key` up; a hit becomes the most recently used, a miss is inserted with `cost`
    /// (evicting from the least recently used end until the total fits; an object costing more
    /// than the capacity is not kept). Returns whether it was a hit.
    mutating func access(_ key: UInt64, cost: Int) -> Bool {
        if let slot = index[key] {
            unlink(slot)
            pushFront(slot)
            return true
        }
        guard cost <= capacity else { return false }
        while totalCost + cost > capacity, tail >= 0 {
            let victim = tail
            unlink(victim)
            index[keys[Int(victim)]] = nil
            totalCost -= costs[Int(victim)]
            freeSlots.append(victim)
        }
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            keys[Int(slot)] = key
            costs[Int(slot)] = cost
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            costs.append(cost)
            previous.append(-1)
            next.append(-1)
        }
        index[key] = slot
        totalCost += cost
        pushFront(slot)
        return false
    }

    private mutating func unlink(_ slot: Int32) {
        let before = previous[Int(slot)]
        let after = next[Int(slot)]
        if before >= 0 { next[Int(before)] = after } else { head = after }
        if after >= 0 { previous[Int(after)] = before } else { tail = before }
    }

    private mutating func pushFront(_ slot: Int32) {
        previous[Int(slot)] = -1
        next[Int(slot)] = head
        if head >= 0 { previous[Int(head)] = slot }
        head = slot
        if tail < 0 { tail = slot }
    }
}
