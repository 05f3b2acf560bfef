/// The lists a ``MemoryShard``'s entries are in.
@usableFromInline
enum Segment: UInt8, Sendable {
    /// New entries (under `.lru`, every entry).
    case window
    /// Admitted to the main area, not read since.
    case probation
    /// Read while in probation.
    case protected

    /// The order in which lists give up entries when the main area or a trim must: probation
    /// first, then the protected list, then the window, which holds the newest entries.
    @usableFromInline static let evictionOrder: [Segment] = [.probation, .protected, .window]
}

/// A node's place in its list.
@usableFromInline
struct Link {
    /// Towards the most recently used end; -1 at it.
    @usableFromInline var newer: Int32
    /// Towards the least recently used end; -1 at it. Links free nodes into the free list.
    @usableFromInline var older: Int32

    @inlinable
    init() {
        newer = -1
        older = -1
    }
}

/// One list's ends and totals.
@usableFromInline
struct ListEnds {
    @usableFromInline var newest: Int32 = -1
    @usableFromInline var oldest: Int32 = -1
    @usableFromInline var count = 0
    @usableFromInline var cost: Int128 = 0

    @inlinable
    init() {}
}

extension MemoryShard {
    /// The list `segment`.
    @inlinable
    subscript(list segment: Segment) -> ListEnds {
        get {
            switch segment {
            case .window: window
            case .probation: probation
            case .protected: protected
            }
        }
        // A setter, not a `_modify` coroutine: the coroutine was not inlined (callgrind showed its
        // resume function on every list move), and the ends are a few words to copy.
        set {
            switch segment {
            case .window: window = newValue
            case .probation: probation = newValue
            case .protected: protected = newValue
            }
        }
    }

    /// Makes the node at `index` the most recently used of its list, unless it is already among
    /// the most recently moved eighth of that list: such a node is far from eviction, and leaving
    /// it saves the list update (two nodes' cache lines) on most hits of hot keys. A node's place
    /// therefore understates its recency by less than an eighth of the list; small lists are
    /// exact. Under `.adaptive`, a hit in probation moves the node to the protected list instead,
    /// and the protected list's least recently used entries beyond its budget back to probation.
    @inlinable
    mutating func markUsed(_ index: Int32) {
        let i = Int(index)
        let segment = nodes[i].segment
        if segment == .probation {
            detach(index)
            attach(index, to: .protected)
            demoteProtectedOverflow()
            return
        }
        let list = self[list: segment]
        if index == list.newest || Int(nodes[i].movesSince(moves)) < list.count >> 3 { return }
        unlink(index, from: segment)
        pushNewest(index, in: segment)
    }

    /// Moves the protected list's least recently used entries to probation while the list is
    /// over its budget.
    @inlinable
    mutating func demoteProtectedOverflow() {
        while protected.count > 0,
            protected.count > budgets.protectedCount || protected.cost > budgets.protectedCost
        {
            let index = protected.oldest
            detach(index)
            attach(index, to: .probation)
        }
    }

    /// Adds the node at `index` to `segment` as its most recently used entry.
    @inlinable
    mutating func attach(_ index: Int32, to segment: Segment) {
        nodes[Int(index)].segment = segment
        self[list: segment].count += 1
        self[list: segment].cost += Int128(nodes[Int(index)].cost)
        pushNewest(index, in: segment)
    }

    /// Takes the node at `index` out of its list.
    @inlinable
    mutating func detach(_ index: Int32) {
        let segment = nodes[Int(index)].segment
        unlink(index, from: segment)
        self[list: segment].count -= 1
        self[list: segment].cost -= Int128(nodes[Int(index)].cost)
    }

    @inlinable
    mutating func unlink(_ index: Int32, from segment: Segment) {
        let i = Int(index)
        let link = links[i]
        if link.newer >= 0 {
            links[Int(link.newer)].older = link.older
        } else {
            self[list: segment].newest = link.older
        }
        if link.older >= 0 {
            links[Int(link.older)].newer = link.newer
        } else {
            self[list: segment].oldest = link.newer
        }
        links[i] = Link()
    }

    @inlinable
    mutating func pushNewest(_ index: Int32, in segment: Segment) {
        let i = Int(index)
        moves &+= 1
        nodes[i].moved = moves
        let newest = self[list: segment].newest
        links[i].older = newest
        links[i].newer = -1
        if newest >= 0 { links[Int(newest)].newer = index } else { self[list: segment].oldest = index }
        self[list: segment].newest = index
    }
}
