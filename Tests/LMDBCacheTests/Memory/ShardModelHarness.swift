import Testing

@testable import LMDBCache

/// Drives one ``MemoryShard`` and a ``ReferenceShard`` with the same operations and compares
/// them after every step: each list's keys in LRU order, each entry's value, cost, access time
/// and expiry, the counts and costs, every removal (key, value, reason; in order, except where
/// the shard's order is that of its node slots), the lookups' results, the statistics, the
/// sketch's counters, the window's share; and checks ``ShardInvariants`` on the shard.
///
/// The first divergence is recorded as an issue, with the operations that led to it, and ends
/// the run (`failed`): everything after it would differ too.
struct ShardModelHarness {
    var shard: MemoryShard<Int, Int>
    var model: ReferenceShard
    let tag: (Int) -> UInt32
    var now: UInt64
    private(set) var steps = 0
    private(set) var failed = false
    /// The latest operations (a ring), for the report of a divergence.
    private var history: [Operation?] = Array(repeating: nil, count: 40)

    /// An operation, described only when a divergence is reported.
    enum Operation: CustomStringConvertible {
        case lookup(Int, counting: Bool)
        case insert(Int, value: Int, cost: Int, expires: UInt64)
        case contains(Int)
        case remove(Int)
        case recordAccess(Int)
        case removeAll
        case trim(count: Int?, cost: Int?, accessedBefore: UInt64?)
        case removeExpired
        case schedulerPass(idleBefore: UInt64?)
        case time(UInt64)

        var description: String {
            switch self {
            case .lookup(let key, let counting): "lookup(\(key)\(counting ? "" : ", not counting"))"
            case .insert(let key, let value, let cost, let expires):
                "insert(\(key), value \(value), cost \(cost), expires \(expires))"
            case .contains(let key): "contains(\(key))"
            case .remove(let key): "remove(\(key))"
            case .recordAccess(let key): "recordAccess(\(key))"
            case .removeAll: "removeAll()"
            case .trim(let count, let cost, let before):
                "trim(count: \(count as Any), cost: \(cost as Any), accessedBefore: \(before as Any))"
            case .removeExpired: "removeExpired()"
            case .schedulerPass(let idleBefore): "schedulerPass(idleBefore: \(idleBefore as Any))"
            case .time(let now): "now = \(now)"
            }
        }
    }

    private mutating func remember(_ operation: Operation) {
        history[recorded % history.count] = operation
        recorded += 1
    }

    private var recorded = 0
    let name: String
    let checksInvariants: Bool

    /// A shard and its model with the same limits and seed.
    init(
        _ name: String, count: Int?, cost: Int?, age: UInt64?, adaptive: Bool = true, seed: UInt64,
        now: UInt64 = 1_000_000, checksInvariants: Bool = true,
        tag: @escaping (Int) -> UInt32 = { UInt32(truncatingIfNeeded: $0) }
    ) {
        self.name = name
        shard = MemoryShard(limits: .init(count: count, cost: cost, age: age), adaptive: adaptive, seed: seed)
        model = ReferenceShard(count: count, cost: cost, age: age, adaptive: adaptive, seed: seed)
        self.tag = tag
        self.now = now
        self.checksInvariants = checksInvariants
    }

    // MARK: Operations

    /// A counted lookup; returns the shard's result.
    @discardableResult
    mutating func lookup(_ key: Int, counting: Bool = true) -> Int? {
        var removed = RemovedEntries<Int, Int>()
        let got = shard.value(forKey: key, tag: tag(key), now: now, removed: &removed, counting: counting)
        let expected = model.value(forKey: key, tag: tag(key), now: now, counting: counting)
        finish(.lookup(key, counting: counting), removed, result: (got, expected))
        return got
    }

    /// A lookup, and on a miss an insert of the key (a trace replay's request).
    mutating func fill(_ key: Int, cost: Int = 1, expires: UInt64 = 0) {
        if lookup(key) == nil, !failed { insert(key, value: key, cost: cost, expires: expires) }
    }

    mutating func insert(_ key: Int, value: Int, cost: Int, expires: UInt64 = 0) {
        var removed = RemovedEntries<Int, Int>()
        shard.insert(value, forKey: key, tag: tag(key), cost: cost, expires: expires, now: now, removed: &removed)
        model.insert(value, forKey: key, tag: tag(key), cost: cost, expires: expires, now: now)
        finish(.insert(key, value: value, cost: cost, expires: expires), removed)
    }

    mutating func contains(_ key: Int) {
        let got = shard.contains(key, tag: tag(key), now: now)
        let expected = model.contains(key, now: now)
        finish(.contains(key), RemovedEntries(), result: (got ? 1 : 0, expected ? 1 : 0))
    }

    mutating func remove(_ key: Int) {
        var removed = RemovedEntries<Int, Int>()
        let got = shard.removeValue(forKey: key, tag: tag(key), now: now, removed: &removed)
        let expected = model.removeValue(forKey: key, now: now)
        finish(.remove(key), removed, result: (got, expected))
    }

    mutating func recordAccess(_ key: Int) {
        shard.recordAccess(tag: tag(key))
        model.recordAccess(tag: tag(key))
        finish(.recordAccess(key), RemovedEntries())
    }

    mutating func removeAll() {
        var removed = RemovedEntries<Int, Int>()
        shard.removeAll(removed: &removed)
        model.removeAll()
        finish(.removeAll, removed)
    }

    mutating func trim(count: Int? = nil, cost: Int? = nil, accessedBefore: UInt64? = nil) {
        var removed = RemovedEntries<Int, Int>()
        shard.trim(count: count, cost: cost, accessedBefore: accessedBefore, now: now, removed: &removed)
        model.trim(count: count, cost: cost, accessedBefore: accessedBefore, now: now)
        // Under .adaptive the age scan walks node slots, whose order the model does not know.
        let unordered = accessedBefore != nil && shard.isAdaptive
        finish(.trim(count: count, cost: cost, accessedBefore: accessedBefore), removed, unordered: unordered)
    }

    mutating func removeExpired() {
        var removed = RemovedEntries<Int, Int>()
        shard.removeExpired(now: now, removed: &removed)
        model.removeExpired(now: now)
        finish(.removeExpired, removed)
    }

    /// What the trimming scheduler's pass does to one shard (MemoryCache.trimPass).
    mutating func schedulerPass(idleBefore: UInt64?) {
        var removed = RemovedEntries<Int, Int>()
        shard.removeExpired(inSlots: 0..<shard.nodeSlots, now: now, idleBefore: idleBefore, removed: &removed)
        if let idleBefore {
            while !shard.removeIdle(accessedBefore: idleBefore, limit: 256, removed: &removed) {}
        }
        model.schedulerPass(now: now, idleBefore: idleBefore)
        finish(.schedulerPass(idleBefore: idleBefore), removed, unordered: true)
    }

    mutating func advance(by milliseconds: UInt64) {
        now += milliseconds
        remember(.time(now))
    }

    mutating func rewind(by milliseconds: UInt64) {
        now -= min(now, milliseconds)
        remember(.time(now))
    }

    // MARK: Comparison

    private mutating func finish(
        _ operation: Operation, _ removed: RemovedEntries<Int, Int>, result: (Int?, Int?)? = nil,
        unordered: Bool = false
    ) {
        guard !failed else { return }
        steps += 1
        remember(operation)
        var got: [(key: Int, value: Int, reason: RemovalReason)] = []
        removed.forEach { got.append(($0.key, $0.value, $0.reason)) }
        var expected = model.takeRemovals()
        if unordered {
            got.sort { $0.key < $1.key }
            expected.sort { $0.key < $1.key }
        }
        var differences: [String] = []
        if let (actual, wanted) = result, actual != wanted {
            differences.append(
                "result \(actual.map(String.init) ?? "nil"), the model's \(wanted.map(String.init) ?? "nil")")
        }
        if !got.elementsEqual(expected, by: { $0.key == $1.key && $0.value == $1.value && $0.reason == $1.reason }) {
            differences.append("removals \(Self.describe(got)), the model's \(Self.describe(expected))")
        }
        differences += stateDifferences()
        if checksInvariants {
            // The shard's own lookup of every key on every 16th step; the slot walk proves it the others.
            differences += ShardInvariants.problems(shard, lookingUp: steps % 16 == 0).map { "invariant: \($0)" }
        }
        guard !differences.isEmpty else { return }
        failed = true
        Issue.record(
            """
            \(name): step \(steps), \(operation) at now = \(now):
            \(differences.joined(separator: "\n"))
            shard lists: \(Self.describe(lists(of: shard)))
            model lists: \(Self.describe(ReferenceShard.List.allCases.map { model.keys(in: $0) }))
            latest operations (oldest first):
            \(latestOperations.joined(separator: "\n"))
            """)
    }

    var latestOperations: [String] {
        (0..<history.count).compactMap { history[(recorded + $0) % history.count]?.description }
    }

    /// Each list's keys, oldest first.
    func lists(of shard: MemoryShard<Int, Int>) -> [[Int]] {
        nodeLists(of: shard).map { $0.map { shard.nodes[Int($0)].key ?? .min } }
    }

    /// Each list's node indices, oldest first.
    func nodeLists(of shard: MemoryShard<Int, Int>) -> [[Int32]] {
        [Segment.window, .probation, .protected].map { segment in
            var indices: [Int32] = []
            var index = shard[list: segment].oldest
            while index >= 0, indices.count <= shard.nodes.count {
                indices.append(index)
                index = shard.links[Int(index)].newer
            }
            return indices
        }
    }

    func stateDifferences() -> [String] {
        var differences: [String] = []
        let shardLists = nodeLists(of: shard)
        for list in ReferenceShard.List.allCases {
            let indices = shardLists[list.rawValue]
            let keys = model.keys(in: list)
            guard indices.count == keys.count else {
                differences.append("\(list) differs")
                continue
            }
            for position in indices.indices {
                let key = keys[position]
                let node = shard.nodes[Int(indices[position])]
                guard node.key == key, let entry = model.entries[key] else {
                    differences.append("\(list) differs")
                    break
                }
                if node.value != entry.value || node.cost != entry.cost || node.accessed != entry.accessed
                    || node.expires != entry.expires
                {
                    differences.append(
                        "key \(key): value \(node.value as Any), cost \(node.cost), accessed \(node.accessed), expires "
                            + "\(node.expires); the model's \(entry.value), \(entry.cost), \(entry.accessed), "
                            + "\(entry.expires)")
                }
            }
        }
        if shard.count != model.count { differences.append("count \(shard.count), the model's \(model.count)") }
        if shard.cost != model.totalCost { differences.append("cost \(shard.cost), the model's \(model.totalCost)") }
        for list in ReferenceShard.List.allCases {
            let ends = shard[list: list.segment]
            if ends.count != model.keys(in: list).count || ends.cost != model.listCost(list) {
                differences.append(
                    "\(list): count \(ends.count), cost \(ends.cost); the model's \(model.keys(in: list).count), "
                        + "\(model.listCost(list))")
            }
        }
        if shard.statistics.hits != model.hits || shard.statistics.misses != model.misses {
            differences.append(
                "hits/misses \(shard.statistics.hits)/\(shard.statistics.misses), the model's \(model.hits)/\(model.misses)"
            )
        }
        for reason in RemovalReason.allCases
        where shard.statistics.removals[reason.index] != model.removalsByReason[reason, default: 0] {
            differences.append(
                "\(reason) removals \(shard.statistics.removals[reason.index]), the model's "
                    + "\(model.removalsByReason[reason, default: 0])")
        }
        if shard.sketch.words != model.sketch.words || shard.sketch.additions != model.sketch.additions {
            differences.append("the sketches' counters differ")
        }
        if shard.windowShare != (model.adaptive ? model.share : 1) {
            differences.append("window share \(shard.windowShare), the model's \(model.share)")
        }
        if shard.isAdaptive && shard.isFull != model.full {
            differences.append("full \(shard.isFull), the model's \(model.full)")
        }
        return differences
    }

    static func describe(_ removals: [(key: Int, value: Int, reason: RemovalReason)]) -> String {
        "[" + removals.map { "\($0.key)=\($0.value) \($0.reason)" }.joined(separator: ", ") + "]"
    }

    static func describe(_ lists: [[Int]]) -> String {
        zip(["window", "probation", "protected"], lists).map { "\($0) \($1)" }.joined(separator: "; ")
    }
}
