/// `S3-FIFO`: Yang, Zhang, Qiu, Yue and Vinayak's Simple, Scalable, Static FIFO eviction ("FIFO
/// queues are all you need for cache eviction", SOSP 2023), exact and single-threaded, written from
/// the paper's description, to replay traces beside LMDBCache.
///
/// Three FIFO queues: `small` (10 % of the capacity), `main` (the other 90 %) and `ghost` (keys and
/// costs only, of objects evicted from `small`, as much as `main` holds). Each cached object has a
/// frequency counter capped at 3, which a hit raises. A missed object goes into `main` if its key
/// was in `ghost`, else into `small`. Evicting from `small` looks at its oldest object: one hit at
/// least `moveToMainThreshold` times moves to `main` (its counter back to 0) and the next oldest is
/// looked at; otherwise it is evicted and its key goes into `ghost`. Evicting from `main` reinserts
/// its oldest object at the new end, counter less one, while the counter is above 0, and evicts the
/// first it finds at 0. `ghost` forgets its oldest keys when full.
///
/// Where the paper leaves a choice, this follows libCacheSim's S3-FIFO (`S3FIFO.c`,
/// 1a1a11a/libCacheSim, read, not copied, at commit 035d832c7757f8934e60081cd70eabbf11260d96; its
/// misses are those of the `S3FIFO` of the PyPI package libcachesim 0.3.5) at its defaults,
/// `small-size-ratio=0.10`, `ghost-size-ratio=0.90`, `move-to-main-threshold=2`:
///
/// - `small` holds `Int(0.1 × capacity)`, `main` the rest, `ghost` `Int(0.9 × capacity)` in cost:
///   count-bounded, as many keys as `main` holds objects; byte-bounded, bytes.
/// - An object moves from `small` to `main` when hit at least twice there (`moveToMainThreshold`:
///   libCacheSim's default, and the SOSP '23 artifact's, below), and starts `main` with its counter
///   at 0. With a threshold of 1 (one hit), OLTP would lose up to 0.68 points.
/// - A miss evicts, one object at a time, until the object fits: from `main` while it holds more
///   than its 90 % or `small` is empty, else from `small` (moving objects to `main` does not evict
///   from `main` at once; the evictions that follow do).
/// - Bounded by total cost, like ``ExactLRU`` (count-bounded traces give every object cost 1): an
///   object costing more than `small` holds is not cached, nor one costing exactly as much unless its
///   key was in `ghost` (libCacheSim refuses that one only after evicting for it; here nothing is
///   evicted for it), and a key costing more than `ghost` holds is not remembered.
///
/// One rule is libCacheSim's current one, not the paper's: until the first eviction, a missed object
/// goes into `main` once `small` is full (libCacheSim's `S3FIFO.c` says so in its header; its
/// `S3FIFOv0.c`, like the SOSP '23 artifact's `S3FIFO.c` in Thesys-lab/sosp23-s3fifo, always inserts
/// into `small`, as the paper's algorithm does). It is kept because it matters to the check: without
/// it this gives, on OLTP, 540,808, 484,371, 403,311, 341,517 and 310,454 misses at 1,000 to 15,000
/// pages (up to 0.13 points from libcachesim 0.3.5's 540,669, 484,187, 404,521, 341,108, 310,977, past
/// the suite's 0.05), and on cloudPhysicsIO exactly the misses libCacheSim's tests assert for
/// `S3-FIFOv0`; with it, exactly libCacheSim's `S3FIFO` misses on both traces.
struct ExactS3FIFO {
    /// Which queue each slot is on.
    enum Queue: UInt8 {
        case small = 0, main, ghost
    }

    /// Hits in `small` that move an object to `main` when it is the oldest there.
    static let moveToMainThreshold: UInt8 = 2
    /// The counter's cap (two bits).
    static let maximumFrequency: UInt8 = 3

    private var index: [UInt64: Int32] = [:]
    private var keys: [UInt64] = []
    private var costs: [Int] = []
    private var frequencies: [UInt8] = []
    /// Which ``Queue`` each slot is on (its raw value).
    private var queues: [UInt8] = []
    private var freeSlots: [Int32] = []
    private var small = SlotList()
    private var main = SlotList()
    private var ghost = SlotList()
    /// Whether anything was evicted yet (until then `small` full sends new objects to `main`).
    private var hasEvicted = false
    let capacity: Int
    let smallCapacity: Int
    let mainCapacity: Int
    let ghostCapacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        smallCapacity = Int(Double(capacity) * 0.1)
        mainCapacity = capacity - smallCapacity
        ghostCapacity = Int(Double(capacity) * 0.9)
    }

    /// Looks `key` up: a hit in `small` or `main` raises its counter; a miss inserts the object with
    /// `cost` (into `main` if its key was in `ghost`, else into `small`), evicting until it fits.
    /// Returns whether it was a hit.
    mutating func access(_ key: UInt64, cost: Int) -> Bool {
        var inGhost = false
        if let slot = index[key] {
            switch Queue(rawValue: queues[Int(slot)]) {
            case .small, .main:
                frequencies[Int(slot)] = min(frequencies[Int(slot)] + 1, Self.maximumFrequency)
                return true
            case .ghost, nil:
                ghost.remove(slot, cost: costs[Int(slot)])
                forget(slot)
                inGhost = true
            }
        }
        guard cost <= capacity, cost <= smallCapacity, inGhost || cost < smallCapacity else { return false }
        while cost > capacity - (small.cost + main.cost) {
            evict()
        }
        let slot = newSlot(key, cost: cost)
        if inGhost || (!hasEvicted && small.cost >= smallCapacity) {
            push(slot, on: .main)
        } else {
            push(slot, on: .small)
        }
        return false
    }

    /// Evicts one object: from `main` while it is over its share or `small` is empty, else from
    /// `small`.
    private mutating func evict() {
        hasEvicted = true
        if main.cost > mainCapacity || small.isEmpty {
            evictFromMain()
        } else {
            evictFromSmall()
        }
    }

    /// Moves `small`'s oldest objects hit often enough to `main` until one is not, and evicts that
    /// one, remembering its key in `ghost`.
    private mutating func evictFromSmall() {
        while !small.isEmpty {
            let slot = small.oldest
            small.remove(slot, cost: costs[Int(slot)])
            if frequencies[Int(slot)] >= Self.moveToMainThreshold {
                frequencies[Int(slot)] = 0
                push(slot, on: .main)
            } else {
                remember(slot)
                return
            }
        }
    }

    /// Reinserts `main`'s oldest object, counter less one, while its counter is above 0; evicts the
    /// first at 0.
    private mutating func evictFromMain() {
        while !main.isEmpty {
            let slot = main.oldest
            if frequencies[Int(slot)] > 0 {
                frequencies[Int(slot)] -= 1
                main.moveToNewest(slot, cost: costs[Int(slot)])
            } else {
                main.remove(slot, cost: costs[Int(slot)])
                forget(slot)
                return
            }
        }
    }

    /// Puts the key of `slot` (just evicted from `small`) into `ghost`, forgetting `ghost`'s oldest
    /// keys until it fits.
    private mutating func remember(_ slot: Int32) {
        let cost = costs[Int(slot)]
        guard cost <= ghostCapacity else {
            forget(slot)
            return
        }
        while cost > ghostCapacity - ghost.cost, !ghost.isEmpty {
            let oldest = ghost.oldest
            ghost.remove(oldest, cost: costs[Int(oldest)])
            forget(oldest)
        }
        push(slot, on: .ghost)
    }

    private mutating func push(_ slot: Int32, on queue: Queue) {
        queues[Int(slot)] = queue.rawValue
        switch queue {
        case .small: small.push(slot, cost: costs[Int(slot)])
        case .main: main.push(slot, cost: costs[Int(slot)])
        case .ghost: ghost.push(slot, cost: costs[Int(slot)])
        }
    }

    private mutating func newSlot(_ key: UInt64, cost: Int) -> Int32 {
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            keys[Int(slot)] = key
            costs[Int(slot)] = cost
            frequencies[Int(slot)] = 0
        } else {
            slot = Int32(keys.count)
            keys.append(key)
            costs.append(cost)
            frequencies.append(0)
            queues.append(0)
        }
        index[key] = slot
        return slot
    }

    /// Forgets `slot`'s object altogether (it is on no queue).
    private mutating func forget(_ slot: Int32) {
        index[keys[Int(slot)]] = nil
        freeSlots.append(slot)
    }
}
