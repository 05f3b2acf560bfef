/// A doubly linked list of slots (a policy's indices into its own arrays of keys and costs), newest
/// first, with the total cost of its slots: the stacks and queues of ``ExactLIRS`` and
/// ``ExactS3FIFO``. A slot is on a list at most once; the caller says what each slot costs.
struct SlotList {
    /// The most and least recently added slot; -1 when empty.
    private(set) var newest: Int32 = -1
    private(set) var oldest: Int32 = -1
    /// The total cost of the slots on the list.
    private(set) var cost = 0
    private var previous: [Int32] = []
    private var next: [Int32] = []
    private var member: [Bool] = []

    var isEmpty: Bool { newest < 0 }

    func contains(_ slot: Int32) -> Bool {
        Int(slot) < member.count && member[Int(slot)]
    }

    /// Adds `slot` (not on the list) at the newest end.
    mutating func push(_ slot: Int32, cost: Int) {
        while member.count <= Int(slot) {
            previous.append(-1)
            next.append(-1)
            member.append(false)
        }
        member[Int(slot)] = true
        previous[Int(slot)] = -1
        next[Int(slot)] = newest
        if newest >= 0 { previous[Int(newest)] = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
        self.cost += cost
    }

    /// Takes `slot` (on the list) off it.
    mutating func remove(_ slot: Int32, cost: Int) {
        let before = previous[Int(slot)]
        let after = next[Int(slot)]
        if before >= 0 { next[Int(before)] = after } else { newest = after }
        if after >= 0 { previous[Int(after)] = before } else { oldest = before }
        member[Int(slot)] = false
        self.cost -= cost
    }

    /// Moves `slot` (on the list) to the newest end.
    mutating func moveToNewest(_ slot: Int32, cost: Int) {
        guard slot != newest else { return }
        remove(slot, cost: cost)
        push(slot, cost: cost)
    }
}
