extension MemoryShard {
    /// Removes expired entries, then others while there are more than `count` entries or `cost`
    /// cost (least recently used first; under `.adaptive` the main area's, probation first, then
    /// the window's), then those last used before `accessedBefore`.
    ///
    /// - Complexity: O(n) for the expiry scan (and under `.adaptive` the age scan), plus O(1) per
    ///   removal.
    @inlinable
    mutating func trim(
        count countTarget: Int?, cost costTarget: Int?, accessedBefore: UInt64?, now: UInt64,
        removed: inout RemovedEntries<Key, Value>
    ) {
        removeExpired(now: now, removed: &removed)
        if isAdaptive {
            while (countTarget.map { count > $0 } ?? false) || (costTarget.map { cost > Int128($0) } ?? false) {
                let victim = mainVictim >= 0 ? mainVictim : window.oldest
                guard victim >= 0 else { break }
                removed.append(remove(victim, reason: count > countTarget ?? .max ? .count : .cost))
            }
            if let accessedBefore {
                for i in nodes.indices where nodes[i].key != nil && nodes[i].accessed < accessedBefore {
                    removed.append(remove(Int32(i), reason: .age))
                }
            }
            return
        }
        while window.oldest >= 0 {
            let reason: RemovalReason
            if let countTarget, count > countTarget {
                reason = .count
            } else if let costTarget, cost > Int128(costTarget) {
                reason = .cost
            } else if let accessedBefore, nodes[Int(window.oldest)].accessed < accessedBefore {
                reason = .age
            } else {
                break
            }
            removed.append(remove(window.oldest, reason: reason))
        }
    }

    /// Slots in the node array, live or free: the range a batched expiry scan walks.
    @usableFromInline var nodeSlots: Int { nodes.count }

    /// Removes the expired entries among node slots `range` (clamped to the array): one batch of
    /// the trimming scheduler's expiry scan, which walks slots rather than the lists because slots
    /// stay put while the lock is dropped between batches. Under `.adaptive` the scan also removes
    /// entries last used before `idleBefore`: the lists are not in one access order there.
    @usableFromInline
    mutating func removeExpired(
        inSlots range: Range<Int>, now: UInt64, idleBefore: UInt64? = nil, removed: inout RemovedEntries<Key, Value>
    ) {
        let idleBefore = isAdaptive ? idleBefore : nil
        for i in range.clamped(to: 0..<nodes.count) where nodes[i].key != nil {
            let expires = nodes[i].expires
            if expires != 0, now >= expires {
                removed.append(remove(Int32(i), reason: .expired))
            } else if let idleBefore, nodes[i].accessed < idleBefore {
                removed.append(remove(Int32(i), reason: .age))
            }
        }
    }

    /// Removes up to `limit` entries last used before `cutoff`, least recently used first; true
    /// when none is left (under `.adaptive`, at the lists' least recently used ends: the expiry
    /// scan removed the others).
    @usableFromInline
    mutating func removeIdle(accessedBefore cutoff: UInt64, limit: Int, removed: inout RemovedEntries<Key, Value>)
        -> Bool
    {
        for _ in 0..<limit {
            guard let index = idleEnd(accessedBefore: cutoff) else { return true }
            removed.append(remove(index, reason: .age))
        }
        return idleEnd(accessedBefore: cutoff) == nil
    }

    /// A list's least recently used entry if it was last used before `cutoff`.
    @usableFromInline
    func idleEnd(accessedBefore cutoff: UInt64) -> Int32? {
        if window.oldest >= 0, nodes[Int(window.oldest)].accessed < cutoff { return window.oldest }
        if probation.oldest >= 0, nodes[Int(probation.oldest)].accessed < cutoff { return probation.oldest }
        if protected.oldest >= 0, nodes[Int(protected.oldest)].accessed < cutoff { return protected.oldest }
        return nil
    }

    /// Removes every entry whose expiry has passed.
    ///
    /// - Complexity: O(n).
    @inlinable
    mutating func removeExpired(now: UInt64, removed: inout RemovedEntries<Key, Value>) {
        for segment in Segment.evictionOrder.reversed() {
            var index = self[list: segment].oldest
            while index >= 0 {
                let next = links[Int(index)].newer
                let expires = nodes[Int(index)].expires
                if expires != 0, now >= expires {
                    removed.append(remove(index, reason: .expired))
                }
                index = next
            }
        }
    }

    /// What changed since the last report, for the cache's metrics: returned once
    /// ``ShardStatistics/reportBatch`` operations piled up, or always with `force`.
    @inlinable
    mutating func takeReport(force: Bool) -> ShardReport? {
        guard force || statistics.unreported >= ShardStatistics.reportBatch else { return nil }
        let report = ShardReport(
            hits: statistics.hits - statistics.reportedHits, misses: statistics.misses - statistics.reportedMisses,
            count: count - statistics.reportedCount,
            // Within ±Int.max, so a metric can negate it.
            cost: Int(clamping: min(max(cost - statistics.reportedCost, -Int128(Int.max)), Int128(Int.max))))
        statistics.unreported = 0
        statistics.reportedHits = statistics.hits
        statistics.reportedMisses = statistics.misses
        statistics.reportedCount = count
        statistics.reportedCost = cost
        return report
    }
}
