/// The hash index of one memory-tier shard: an open-addressing table (linear probing) from a
/// key's hash to the index of its node.
///
/// Each slot is one `UInt64`: the low 32 bits of the key's hash (the tag) above the node index
/// plus one; zero is an empty slot. The tag both places an entry (`tag & mask` is its home slot,
/// so growing never rehashes a key) and filters probes, so a lookup reads a node only when the tag
/// matches. Removal shifts later entries back (no tombstones). The table stays at most half full.
@usableFromInline
struct SlotTable {
    @usableFromInline var slots: [UInt64]
    @usableFromInline var mask: Int
    @usableFromInline var count = 0

    @usableFromInline static let minimumCapacity = 16

    @inlinable
    init() {
        slots = Array(repeating: 0, count: Self.minimumCapacity)
        mask = Self.minimumCapacity - 1
    }

    /// The tag of a hash.
    @inlinable @inline(__always)
    static func tag(_ hash: Int) -> UInt32 {
        UInt32(truncatingIfNeeded: hash)
    }

    /// The node whose tag is `tag` and that `isMatch` accepts.
    ///
    /// - Complexity: O(1) expected.
    @inlinable @inline(__always)
    func find(tag: UInt32, _ isMatch: (Int32) -> Bool) -> Int32? {
        var slot = Int(tag) & mask
        while true {
            let entry = slots[slot]
            if entry == 0 { return nil }
            if UInt32(truncatingIfNeeded: entry >> 32) == tag {
                let node = Int32(truncatingIfNeeded: entry) &- 1
                if isMatch(node) { return node }
            }
            slot = (slot + 1) & mask
        }
    }

    /// Adds `node` under `tag`; the caller has checked that no node for its key is present.
    @inlinable
    mutating func insert(tag: UInt32, node: Int32) {
        if (count + 1) * 2 > slots.count { resize(to: slots.count * 2) }
        place(Self.entry(tag: tag, node: node))
        count += 1
    }

    /// Removes `node`, stored under `tag`.
    @inlinable
    mutating func remove(tag: UInt32, node: Int32) {
        let entry = Self.entry(tag: tag, node: node)
        var hole = Int(tag) & mask
        while slots[hole] != entry { hole = (hole + 1) & mask }
        // Backward shift: move each later entry of the cluster into the hole when the hole lies
        // on its probe path (between its home slot and where it sits).
        var next = hole
        while true {
            next = (next + 1) & mask
            let candidate = slots[next]
            if candidate == 0 { break }
            let home = Int(truncatingIfNeeded: candidate >> 32) & mask
            if (next &- home) & mask >= (next &- hole) & mask {
                slots[hole] = candidate
                hole = next
            }
        }
        slots[hole] = 0
        count -= 1
    }

    /// Empties the table and gives its memory back.
    @inlinable
    mutating func removeAll() {
        self = SlotTable()
    }

    @inlinable
    static func entry(tag: UInt32, node: Int32) -> UInt64 {
        UInt64(tag) << 32 | UInt64(UInt32(bitPattern: node &+ 1))
    }

    @inlinable
    mutating func place(_ entry: UInt64) {
        var slot = Int(truncatingIfNeeded: entry >> 32) & mask
        while slots[slot] != 0 { slot = (slot + 1) & mask }
        slots[slot] = entry
    }

    @inlinable
    mutating func resize(to capacity: Int) {
        let old = slots
        slots = Array(repeating: 0, count: capacity)
        mask = capacity - 1
        for entry in old where entry != 0 { place(entry) }
    }
}
