// A shard's operations: lookup, insert (through admission), removal and expiry, each keeping the
// lists, the totals and the slot table consistent.

extension MemoryShard {
    /// The live value for `key`, which becomes the most recently used entry of its list.
    ///
    /// An entry found expired, or idle past the age limit, is removed into `removed` and missed;
    /// one past the time it is served until (kept to be served stale) is missed and kept.
    /// With `counting` false the look counts neither a hit nor a miss (a second look on behalf of
    /// a caller whose first look was counted), nor an access for the adaptive policy.
    @inlinable
    mutating func value(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>, counting: Bool = true
    ) -> Value? {
        guard let found = entry(forKey: key, tag: tag, now: now, removed: &removed, counting: counting, stale: false)
        else { return nil }
        return found.value
    }

    /// ``value(forKey:tag:now:removed:counting:)`` that also returns when the value was stored and,
    /// with `stale`, an entry kept past the time it is served until (flagged `isStale`, with the
    /// time it is gone; a miss, not a use: its place in the lists stays).
    @inlinable
    mutating func entry(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>, counting: Bool,
        stale: Bool
    ) -> StoredValue<Value>? {
        let counted = counting ? 1 : 0
        statistics.unreported += counted
        if isAdaptive && counting { sketch.increment(tag) }
        guard let index = find(key, tag: tag) else {
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                // An uncounted look repeats a counted one: its fill is that access too.
                lastMissTag = tag
            }
            return nil
        }
        let i = Int(index)
        if let reason = staleness(expires: nodes[i].expires, accessed: nodes[i].accessed, now: now) {
            removed.append(remove(index, reason: reason))
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                lastMissTag = tag
            }
            return nil
        }
        if nodes[i].hasServedUntil, now >= servedUntil[index] ?? 0 {
            statistics.misses += counted
            if isAdaptive {
                if counting { sampleLookup(hit: false) }
                lastMissTag = tag
            }
            return stale
                ? StoredValue(value: nodes[i].value!, stored: nodes[i].stored, staleUntil: nodes[i].expires) : nil
        }
        nodes[i].accessed = now
        markUsed(index)
        statistics.hits += counted
        if isAdaptive && counting { sampleLookup(hit: true) }
        return StoredValue(value: nodes[i].value!, stored: nodes[i].stored, staleUntil: 0)
    }

    /// When the live entry for `key` was stored and when it expires (0: never); nil when there
    /// is none. Not an access.
    @inlinable
    func metadata(forKey key: Key, tag: UInt32, now: UInt64) -> (stored: UInt64, expires: UInt64)? {
        guard let index = find(key, tag: tag), isServed(Int(index), now: now) else { return nil }
        let node = nodes[Int(index)]
        return (node.stored, node.hasServedUntil ? servedUntil[index] ?? node.expires : node.expires)
    }

    /// Neither gone (expired, idle past the age limit) nor kept only to be served stale.
    @inlinable
    func isServed(_ i: Int, now: UInt64) -> Bool {
        staleness(expires: nodes[i].expires, accessed: nodes[i].accessed, now: now) == nil
            && (!nodes[i].hasServedUntil || now < servedUntil[Int32(i)] ?? 0)
    }

    /// Records when lookups stop returning the node at `index` (0: when it is gone).
    @inlinable
    mutating func setServedUntil(_ time: UInt64, at index: Int32) {
        if time != 0 {
            servedUntil[index] = time
            nodes[Int(index)].hasServedUntil = true
        } else if nodes[Int(index)].hasServedUntil {
            servedUntil[index] = nil
            nodes[Int(index)].hasServedUntil = false
        }
    }

    /// True when a live entry is stored for `key`; not an access.
    @inlinable
    func contains(_ key: Key, tag: UInt32, now: UInt64) -> Bool {
        guard let index = find(key, tag: tag) else { return false }
        return isServed(Int(index), now: now)
    }

    /// Stores `value` as the most recently used entry, then evicts until the limits hold.
    ///
    /// A new entry enters the window (under `.lru`, the only list) and stays there at least until
    /// the next insert into the shard, whatever the policy: a read right after an insert finds it.
    /// `servedUntil` (0: until `expires`) and `stored` (nil: `now`) are the node's fields; `tags`
    /// replace any the entry had (``EntryTags/none``: the entry is untagged).
    @inlinable
    mutating func insert(
        _ value: Value, forKey key: Key, tag: UInt32, cost: Int, expires: UInt64, servedUntil: UInt64 = 0,
        stored: UInt64? = nil, now: UInt64, removed: inout RemovedEntries<Key, Value>, tags: EntryTags = .none,
        promoted: Bool = false
    ) {
        statistics.unreported += 1
        generation &+= 1
        countWrite(tag: tag)
        if expires != 0 { hasExpiring = true }
        if let limit = limits.cost, cost > limit {
            // It could never stay: it replaces the old value and goes at once, evicting nothing else.
            if let index = find(key, tag: tag) { removed.append(remove(index, reason: .replaced)) }
            statistics.removals[RemovalReason.cost.index] += 1
            removed.append((key, value, .cost))
            return
        }
        if let index = find(key, tag: tag) {
            let i = Int(index)
            // Taken, not copied: the old value is released by the caller, after the lock.
            let old = nodes[i].value.take()!
            let change = Int128(cost) - Int128(nodes[i].cost)
            self.cost += change
            self[list: nodes[i].segment].cost += change
            nodes[i].value = value
            nodes[i].cost = cost
            nodes[i].accessed = now
            nodes[i].expires = expires
            nodes[i].stored = stored ?? now
            nodes[i].isPromoted = promoted
            setServedUntil(servedUntil, at: index)
            if nodes[i].hasTags || !tags.isEmpty { setTags(tags, at: index) }
            if isAdaptive && change > 0 {
                // A costlier value may make room by evicting: it starts over as the window's newest
                // entry, which stays until the next insert (read your writes), and is judged again
                // when it leaves the window. A value costing no more evicts nothing, and is a use.
                detach(index)
                attach(index, to: .window)
            } else {
                markUsed(index)
            }
            statistics.removals[RemovalReason.replaced.index] += 1
            removed.append((key, old, .replaced))
            // Nothing grew, nothing can be stale, and the lists are within their budgets (the
            // window's share may have moved since the last insert): nothing to evict or move.
            if change <= 0 && limits.age == nil && !hasExpiring && segmentsWithinBudgets { return }
        } else {
            let node = Node(
                key: key, value: value, cost: cost, accessed: now, expires: expires, stored: stored ?? now, tag: tag)
            let index: Int32
            if firstFree >= 0 {
                index = firstFree
                firstFree = links[Int(index)].older
                nodes[Int(index)] = node
            } else {
                index = Int32(nodes.count)
                nodes.append(node)
                links.append(Link())
            }
            table.insert(tag: tag, node: index)
            attach(index, to: .window)
            if promoted { nodes[Int(index)].isPromoted = true }
            if servedUntil != 0 { setServedUntil(servedUntil, at: index) }
            // Before the limits are enforced: an entry evicted at once leaves the index with it.
            if !tags.isEmpty { setTags(tags, at: index) }
            count += 1
            self.cost += Int128(cost)
            if isAdaptive { growSketch(adding: tag) }
        }
        enforceLimits(now: now, removed: &removed)
    }

    /// Counts an access of the key whose hash tag is `tag` for the adaptive policy, without a
    /// lookup: a value read from disk whose promotion into memory was skipped.
    @inlinable
    mutating func recordAccess(tag: UInt32) {
        countWrite(tag: tag)
    }

    /// Counts an insert of the key whose hash tag is `tag` in the sketch, unless it fills the
    /// shard's last miss: a miss and the insert that fills it are one access of the key, counted
    /// at the miss (as Caffeine counts a load once). Any other insert is an access of its own.
    @inlinable
    mutating func countWrite(tag: UInt32) {
        guard isAdaptive else { return }
        if lastMissTag == tag {
            lastMissTag = nil
        } else {
            sketch.increment(tag)
        }
    }

    /// Removes the entry for `key`, returning its value if it was live (one expired, idle past
    /// the age limit, or kept only to be served stale is removed all the same, and not returned).
    @inlinable
    mutating func removeValue(
        forKey key: Key, tag: UInt32, now: UInt64, removed: inout RemovedEntries<Key, Value>
    ) -> Value? {
        statistics.unreported += 1
        generation &+= 1
        guard let index = find(key, tag: tag) else { return nil }
        let served = isServed(Int(index), now: now)
        let entry = remove(index, reason: .explicit)
        removed.append(entry)
        return served ? entry.value : nil
    }

    /// Removes every entry and releases the shard's storage (the adaptive policy's state stays).
    @inlinable
    mutating func removeAll(removed: inout RemovedEntries<Key, Value>) {
        for segment in Segment.evictionOrder {
            var index = self[list: segment].oldest
            while index >= 0 {
                let node = nodes[Int(index)]
                removed.append((node.key!, node.value!, .explicit))
                index = links[Int(index)].newer
            }
        }
        statistics.removals[RemovalReason.explicit.index] += count
        generation &+= 1
        nodes = []
        links = []
        servedUntil = [:]
        refusals = []
        entryTags = [:]
        taggedNodes = [:]
        table.removeAll()
        window = ListEnds()
        probation = ListEnds()
        protected = ListEnds()
        firstFree = -1
        count = 0
        cost = 0
    }

    @inlinable
    func staleness(expires: UInt64, accessed: UInt64, now: UInt64) -> RemovalReason? {
        if expires != 0, now >= expires { return .expired }
        if let age = limits.age, Self.isIdle(accessed: accessed, age: age, now: now) { return .age }
        return nil
    }

    /// Idle for `age` or longer; a clock that went back counts as no time passing.
    @inlinable
    static func isIdle(accessed: UInt64, age: UInt64, now: UInt64) -> Bool {
        now > accessed && now - accessed >= age
    }
}
