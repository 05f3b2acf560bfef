// Tags in a shard: a side table from node to its tags (``MemoryShard/entryTags``) and an index
// from each tag's stored bytes to the nodes carrying it (``MemoryShard/taggedNodes``), so that a
// removal by tag costs O(k) for its k entries. A node flags that it has tags (``Node/hasTags``):
// hits never look at the tables, and an untagged insert or removal only reads the flag.

extension MemoryShard {
    /// Makes `tags` the tags of the node at `index`, dropping any it had from the index
    /// (``EntryTags/none``: untags it).
    ///
    /// - Complexity: O(t) for the t tags dropped and added.
    @inlinable
    mutating func setTags(_ tags: EntryTags, at index: Int32) {
        let i = Int(index)
        if nodes[i].hasTags, let old = entryTags.removeValue(forKey: index) {
            for bytes in old.bytes {
                guard let position = taggedNodes.index(forKey: bytes) else { continue }
                taggedNodes.values[position].remove(index)
                if taggedNodes.values[position].isEmpty { taggedNodes.remove(at: position) }
            }
        }
        nodes[i].hasTags = !tags.isEmpty
        guard !tags.isEmpty else { return }
        entryTags[index] = tags
        for bytes in tags.bytes { taggedNodes[bytes, default: []].insert(index) }
    }

    /// The tags of the live entry for `key` (``EntryTags/none`` when it has none); nil when there
    /// is no live entry. Not an access.
    @inlinable
    func entryTags(forKey key: Key, tag: UInt32, now: UInt64) -> EntryTags? {
        guard let index = find(key, tag: tag), isServed(Int(index), now: now) else { return nil }
        return nodes[Int(index)].hasTags ? entryTags[index] ?? EntryTags.none : EntryTags.none
    }

    /// Removes every entry carrying the tag whose stored bytes are `bytes`, live or not, as
    /// ``RemovalReason/explicit``; returns how many. Counts as a write whether or not any entry
    /// carries the tag: the ``generation`` moves, so a promotion read before it is refused.
    ///
    /// - Complexity: O(k) for the k entries removed (times the tags each carries, at most
    ///   ``EntryTags/maxCount``).
    @inlinable
    mutating func removeAll(taggedWith bytes: [UInt8], removed: inout RemovedEntries<Key, Value>) -> Int {
        statistics.unreported += 1
        generation &+= 1
        // Taken out first: removing each node drops it from its other tags' sets, not from this one.
        guard let members = taggedNodes.removeValue(forKey: bytes) else { return 0 }
        for index in members { removed.append(remove(index, reason: .explicit)) }
        return members.count
    }
}
