// Promotions from the disk tier that lose a race: per key, a read never returns an older value
// than one a read before it returned, even while the disk changes under concurrent reads.
//
// A promotion is refused when the shard moved since its memory miss (an insert or removal in
// the shard, or an invalidation from another process), so a value read from disk never replaces
// a newer write or brings back a removed entry. That alone lets a slow read of an older record
// land after a faster read of a newer one was refused: thread 1 misses and reads v1; another
// process commits v2; thread 2 misses at the same generation and reads v2; thread 1 promotes
// v1, which moves the generation; thread 2's promotion of v2 is refused and returns v2; the
// memory tier then serves v1 until the change log says v2 (the other order: thread 2 is refused
// first by an unrelated write, then thread 1 promotes v1). So a refused promotion drops the key's
// promoted entry (never an inserted one, which is this process's own newer write) and is
// remembered, with the generation, so that a promotion that missed before the refusal is refused
// too. The entry dropped may hold the very record the refused read found (record write times are
// milliseconds, too coarse to tell records apart): that costs one more disk read, and only when
// reads of one key race.
extension MemoryShard {
    /// A promotion of `key`, refused: the key's promoted entry goes, and the refusal is
    /// remembered. An entry inserted here stays (it is newer than any read that raced it).
    @inlinable
    mutating func refusePromotion(_ key: Key, tag: UInt32, removed: inout RemovedEntries<Key, Value>) {
        if let index = find(key, tag: tag) {
            guard nodes[Int(index)].isPromoted else { return }
            removed.append(remove(index, reason: .replaced))
            generation &+= 1
        }
        if refusals.count < Self.refusalMemory {
            refusals.append((tag, generation))
        } else {
            // The ring is full: the refusal it forgets must still refuse the promotions that
            // missed before it. Moving the generation refuses every promotion that missed so far
            // (a conservative refusal costs one disk read); later misses promote as usual.
            generation &+= 1
            refusals[nextRefusal] = (tag, generation)
        }
        nextRefusal = (nextRefusal + 1) % Self.refusalMemory
    }

    /// True when a promotion of the key with slot tag `tag` was refused at or after `generation`
    /// (among the last ``refusalMemory`` refusals; an older one moved the generation): a
    /// promotion that missed then read the disk no later than the refused one, and may hold an
    /// older record.
    @inlinable
    func wasRefused(tag: UInt32, since generation: UInt64) -> Bool {
        refusals.contains { $0.tag == tag && $0.generation >= generation }
    }
}
