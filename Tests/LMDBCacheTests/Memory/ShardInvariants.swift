@testable import LMDBCache

/// Structural checks of a ``MemoryShard``'s storage, independent of its policy's decisions: the
/// lists' links agree both ways and with their ends, every node is in exactly one list or on the
/// free list, the lists' and the shard's counts and costs are the sums of their nodes, the slot
/// table finds every live key and holds nothing else, and the limits hold.
enum ShardInvariants {
    /// What is wrong with `shard`'s structure; empty when nothing is.
    ///
    /// The slot table is checked slot by slot (each occupied slot is a live node's, under its tag,
    /// one per node, with no empty slot between its home slot and it, so a linear probe reaches
    /// it); with `lookingUp` each live key is also looked up through the shard's own `find`.
    /// (For `Int` keys and values, the tests' shards: a generic walk is several times slower in a
    /// debug build, and this runs after every step of long runs.)
    static func problems(_ shard: MemoryShard<Int, Int>, lookingUp: Bool = true) -> [String] {
        var problems: [String] = []
        let nodes = shard.nodes
        let links = shard.links
        guard links.count == nodes.count else {
            return ["\(links.count) links for \(nodes.count) nodes"]
        }
        // Where each node was found: 0 nowhere yet, 1 … 3 a list, 4 the free list.
        var place: [UInt8] = Array(repeating: 0, count: nodes.count)
        let placeNames = ["nowhere", "the window", "probation", "protected", "the free list"]
        var listedCost: Int128 = 0
        var listed = 0
        for (number, segment) in [(UInt8(1), Segment.window), (2, .probation), (3, .protected)] {
            let ends = shard[list: segment]
            var previous: Int32 = -1
            var index = ends.oldest
            var count = 0
            // In Int (the tests' costs are small), converted once: Int128's generic init is slow.
            var cost = 0
            while index >= 0 {
                guard Int(index) < nodes.count else {
                    problems.append("\(segment): index \(index) out of \(nodes.count) nodes")
                    break
                }
                let i = Int(index)
                if place[i] != 0 {
                    problems.append(
                        "\(segment): node \(i) already seen in \(placeNames[Int(place[i])]) (a cycle or a shared node)")
                    break
                }
                place[i] = number
                let link = links[i]
                let node = nodes[i]
                if link.older != previous {
                    problems.append("\(segment): node \(i) links older to \(link.older), not \(previous)")
                }
                if node.segment != segment {
                    problems.append("\(segment): node \(i) says it is in \(node.segment)")
                }
                if node.key == nil || node.value == nil {
                    problems.append("\(segment): node \(i) is listed without a key or value")
                }
                count += 1
                cost &+= node.cost
                previous = index
                index = link.newer
            }
            if previous != ends.newest {
                problems.append(
                    "\(segment): the walk from the oldest ends at \(previous), the newest is \(ends.newest)")
            }
            if ends.newest >= 0, Int(ends.newest) < nodes.count, links[Int(ends.newest)].newer != -1 {
                problems.append("\(segment): the newest links to a newer node")
            }
            if count != ends.count { problems.append("\(segment): \(count) nodes, the list says \(ends.count)") }
            if Int128(cost) != ends.cost {
                problems.append("\(segment): nodes cost \(cost), the list says \(ends.cost)")
            }
            listed += count
            listedCost += Int128(cost)
        }
        if listed != shard.count { problems.append("\(listed) nodes listed, the shard counts \(shard.count)") }
        if listedCost != shard.cost { problems.append("listed nodes cost \(listedCost), the shard says \(shard.cost)") }

        // Every live node is listed; the rest are on the free list, once each.
        for i in 0..<nodes.count where nodes[i].key != nil && place[i] == 0 {
            problems.append("node \(i) is live but in no list")
        }
        var free = 0
        var index = shard.firstFree
        while index >= 0 {
            guard Int(index) < nodes.count else {
                problems.append("free list: index \(index) out of \(nodes.count) nodes")
                break
            }
            let i = Int(index)
            if place[i] != 0 {
                problems.append("free list: node \(i) is also in \(placeNames[Int(place[i])])")
                break
            }
            place[i] = 4
            if nodes[i].key != nil || nodes[i].value != nil {
                problems.append("free list: node \(i) still holds a key or value")
            }
            free += 1
            index = links[i].older
        }
        if free + listed != nodes.count { problems.append("\(listed) listed and \(free) free of \(nodes.count) nodes") }

        // The slot table: one slot per live node, under its tag, reachable from its home slot.
        let table = shard.table
        let slots = table.slots
        if table.count != shard.count { problems.append("the table holds \(table.count), the shard \(shard.count)") }
        if slots.count != table.mask + 1 || slots.count & table.mask != 0 {
            problems.append("the table's \(slots.count) slots do not match its mask \(table.mask)")
            return problems
        }
        if table.count * 2 > slots.count { problems.append("the table is over half full") }
        var slotted = Array(repeating: false, count: nodes.count)
        var occupied = 0
        for position in 0..<slots.count where slots[position] != 0 {
            let entry = slots[position]
            occupied += 1
            let node = Int(Int32(truncatingIfNeeded: entry) &- 1)
            let tag = UInt32(truncatingIfNeeded: entry >> 32)
            guard node >= 0, node < nodes.count, nodes[node].key != nil else {
                problems.append("slot \(position) points at node \(node), which is not live")
                continue
            }
            if slotted[node] { problems.append("node \(node) has two slots") }
            slotted[node] = true
            if nodes[node].tag != tag {
                problems.append("node \(node)'s slot has tag \(tag), the node \(nodes[node].tag)")
            }
            var probe = Int(tag) & table.mask
            while probe != position {
                if slots[probe] == 0 {
                    problems.append("slot \(position) (node \(node)) is past an empty slot on its probe path")
                    break
                }
                probe = (probe + 1) & table.mask
            }
        }
        if occupied != table.count { problems.append("\(occupied) slots occupied, the table counts \(table.count)") }
        for i in 0..<nodes.count where nodes[i].key != nil && !slotted[i] {
            problems.append("node \(i) is live but has no slot")
        }
        if lookingUp {
            for i in 0..<nodes.count {
                guard let key = nodes[i].key else { continue }
                let found = shard.find(key, tag: nodes[i].tag)
                if found != Int32(i) {
                    problems.append("the key of node \(i) is found at \(found.map(String.init) ?? "nil")")
                }
            }
        }

        // The policy's shape and the limits.
        if !shard.isAdaptive, shard.probation.count != 0 || shard.protected.count != 0 {
            problems.append(".lru keeps entries outside the window")
        }
        if let limit = shard.limits.count, shard.count > limit {
            problems.append("\(shard.count) entries over the count limit \(limit)")
        }
        if let limit = shard.limits.cost, shard.cost > Int128(limit) {
            problems.append("cost \(shard.cost) over the cost limit \(limit)")
        }

        // The served-until table holds exactly the live nodes flagged for it, each before the
        // node's end.
        for (i, node) in nodes.enumerated() where node.key != nil {
            let time = shard.servedUntil[Int32(i)]
            if node.hasServedUntil != (time != nil) {
                problems.append("node \(i): flagged \(node.hasServedUntil) but served-until time \(time as Any)")
            }
            if let time, node.expires != 0, time >= node.expires {
                problems.append("node \(i): served until \(time), not before it is gone at \(node.expires)")
            }
        }
        for index in shard.servedUntil.keys where Int(index) >= nodes.count || nodes[Int(index)].key == nil {
            problems.append("a served-until time for node \(index), which holds no entry")
        }
        problems += tagProblems(shard)
        return problems
    }

    /// The tag tables: a node is flagged ``MemoryShard/Node/hasTags`` exactly when the side
    /// table holds its (non-empty) tags; every tag index entry is a live node carrying that tag,
    /// and every tagged node is in the index under each of its tags; no set is empty.
    static func tagProblems(_ shard: MemoryShard<Int, Int>) -> [String] {
        var problems: [String] = []
        let nodes = shard.nodes
        for (i, node) in nodes.enumerated() {
            let tags = shard.entryTags[Int32(i)]
            if node.key == nil {
                if node.hasTags { problems.append("free node \(i) is flagged as tagged") }
                continue
            }
            if node.hasTags != (tags != nil) {
                problems.append("node \(i): flagged tagged \(node.hasTags) but tags \(tags as Any)")
            }
            guard let tags else { continue }
            if tags.isEmpty { problems.append("node \(i): an empty set of tags in the side table") }
            for bytes in tags.bytes where shard.taggedNodes[bytes]?.contains(Int32(i)) != true {
                problems.append("node \(i) carries tag \(String(decoding: bytes, as: UTF8.self)) but is not indexed")
            }
        }
        for index in shard.entryTags.keys where Int(index) >= nodes.count || nodes[Int(index)].key == nil {
            problems.append("tags for node \(index), which holds no entry")
        }
        for (bytes, members) in shard.taggedNodes {
            let name = String(decoding: bytes, as: UTF8.self)
            if members.isEmpty { problems.append("tag \(name) is indexed with no node") }
            for index in members {
                guard Int(index) >= 0, Int(index) < nodes.count, nodes[Int(index)].key != nil else {
                    problems.append("tag \(name) indexes node \(index), which holds no entry")
                    continue
                }
                if shard.entryTags[index]?.bytes.contains(bytes) != true {
                    problems.append("tag \(name) indexes node \(index), which does not carry it")
                }
            }
        }
        return problems
    }
}
