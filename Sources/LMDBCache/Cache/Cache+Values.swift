import Foundation
import LMDBCacheStorage
import Logging

// The two-tier cache's values: lookups (memory, else disk, then promoted), inserts, and removals
// by key, by tag and of everything, each insert or removal one step in both tiers per key.
// Get-or-load is in Cache+Loading.swift and Cache+BulkLoading.swift.

extension Cache {
    /// The live value for `key`: from memory, else from disk (then promoted to memory); nil when
    /// neither tier has one, it expired, or the cache is closed.
    @inlinable
    public func value(forKey key: Key) -> Value? {
        let (value, generation) = memory.lookUp(key)
        if let value { return value }
        return diskValue(forKey: key, generation: generation)
    }

    /// ``value(forKey:)`` without counting a hit or a miss in either tier: a second look for a
    /// caller whose first look was counted.
    func uncountedValue(forKey key: Key) -> Value? {
        let (value, generation) = memory.lookUp(key, counting: false)
        if let value { return value }
        return diskValue(forKey: key, generation: generation, counting: false)
    }

    /// The disk tier's value for a key the memory tier missed, promoted unless the key's shard
    /// moved past `generation`.
    @usableFromInline
    func diskValue(forKey key: Key, generation: UInt64, counting: Bool = true) -> Value? {
        diskEntry(forKey: key, generation: generation, counting: counting, includingStale: false)?.value
    }

    /// ``diskValue(forKey:generation:counting:)`` that also returns when the value was stored
    /// and, with `includingStale`, a value past its expiry kept for ``Freshness/staleIfError``
    /// (`isStale`; a miss, not promoted).
    func diskEntry(
        forKey key: Key, generation: UInt64, counting: Bool, includingStale: Bool
    ) -> StoredValue<Value>? {
        guard let disk, !isClosed.value else { return nil }
        let bytes = key.cacheKeyBytes
        let entry: DiskCache.DiskEntry?
        do {
            entry = try disk.entry(forKey: bytes, includingStale: includingStale)
        } catch {
            logger.debug("LMDBCache disk lookup failed", metadata: ["error": .escaped(error)])
            if counting { counters.diskMiss() }
            return nil
        }
        guard let entry else {
            if counting { counters.diskMiss() }
            return nil
        }
        let decoded: Value
        do {
            decoded = try codec.decode(entry.value)
        } catch {
            // A value this codec cannot read (a changed type, say) is a miss, and goes; only that
            // record, though: a write may have replaced it while it was being decoded.
            logger.info(
                "LMDBCache could not decode a stored value; removing it",
                metadata: ["key": .escaped(key: key), "error": .escaped(error)])
            if counting { counters.diskMiss() }
            counters.failedWrite()
            // A value still queued for the writer to deflate has no record yet: it goes once
            // committed, when a read finds it there.
            if let record = entry.record { try? disk.removeData(forKey: bytes, ifUnchanged: record) }
            return nil
        }
        if entry.isStale {
            if counting { counters.diskMiss() }
            return StoredValue(value: decoded, stored: entry.created, staleUntil: entry.staleUntil)
        }
        if counting { counters.diskHit() }
        // Promoted only if no write to the key's shard came since the miss, so a value read from
        // disk never overwrites a newer insert or brings back a removed entry (nor one another
        // process changed: see ChangeFollower). With a stale window the memory tier keeps it as
        // long as the disk does, serving it until its expiry. Its tags come with it.
        let lifetime = Lifetime(expires: entry.expires, staleUntil: entry.staleUntil)
        memory.insert(
            decoded, forKey: key, cost: configuration.memory.weigher?(decoded) ?? entry.value.count,
            expires: lifetime.memoryExpires, servedUntil: lifetime.memoryServedUntil, stored: entry.created,
            now: memory.now, ifGeneration: generation, tags: entry.tags)
        return StoredValue(value: decoded, stored: entry.created, staleUntil: 0)
    }

    /// Stores `value` under `key` in both tiers, replacing any value there.
    ///
    /// Returns once the value is in memory and its disk write is queued (or, with
    /// ``DiskCache/Durability/synchronous``, committed).
    ///
    /// - Parameters:
    ///   - value: the value to store.
    ///   - key: the key to store it under.
    ///   - cost: the memory tier's cost; nil uses the weigher, else the encoded value's size.
    ///   - expiresAfter: the entry is never returned after this long, read or not, from either tier.
    public func insert(_ value: Value, forKey key: Key, cost: Int? = nil, expiresAfter: Duration? = nil) {
        store(value, forKey: key, cost: cost, expiresAfter: expiresAfter, staleFor: nil)
    }

    /// ``insert(_:forKey:cost:expiresAfter:)`` with tags: ``removeAll(taggedWith:)`` removes the
    /// entry, from both tiers and from every process sharing the directory, with every other
    /// entry carrying one of them.
    ///
    /// ```swift
    /// cache.insert(article, forKey: "a1", tags: ["author:42", "feed"])
    /// cache.removeAll(taggedWith: "author:42")
    /// ```
    ///
    /// Replacing the entry replaces its tags. A tag is a non-empty string of at most 255 UTF-8
    /// bytes, an entry carries at most 32; past those limits nothing is stored, the value the key
    /// held is removed (it must not outlive a write that failed), and ``flush()`` throws
    /// ``CacheError/invalidTag(reason:)``.
    public func insert(
        _ value: Value, forKey key: Key, cost: Int? = nil, expiresAfter: Duration? = nil, tags: Set<String>
    ) {
        store(value, forKey: key, cost: cost, expiresAfter: expiresAfter, staleFor: nil, tags: tags)
    }

    /// Removes every entry carrying `tag` from both tiers, and from the memory tiers of every
    /// process sharing the directory (once they read the change log: ``Configuration/coherence``).
    /// Returns the entries removed: from disk, or in a memory-only cache from memory.
    ///
    /// Queued writes are committed first; the disk tier removes the entries in transactions of at
    /// most 1,024 with its totals exact in each. Writes to the cache wait for the removal, so
    /// each lands wholly before or wholly after it, in both tiers. Loads under way that the
    /// removal covers are not stored: those of keys that carried the tag when the load began
    /// (their loader read its source before the removal), and any value a loader returns
    /// carrying the tag; loads of other keys are unaffected. The same holds in the other
    /// processes once they read the change, and on the other machines of a remote tier.
    /// An empty tag, which no entry can carry, removes nothing and returns 0.
    ///
    /// - Complexity: O(k log n) on disk, O(k) in memory, for k entries carrying the tag.
    @discardableResult
    public func removeAll(taggedWith tag: String) -> Int {
        guard !isClosed.value, let bytes = try? EntryTags.storedBytes(of: tag) else { return 0 }
        var removed = 0
        // Under every key's lock: no load is between its check and its store, and no insert
        // between its disk enqueue and its memory insert.
        let (memoryCount, removedEntries, report) = writeLocks.withAllLocks {
            loads.supersede(taggedWith: bytes)
            if let disk {
                do {
                    removed = try disk.removeAll(taggedWith: tag, origin: origin)
                } catch {
                    record(error, "remove by tag")
                }
            }
            // After the disk: a read that promotes what it found before the removal is refused, as
            // the tag's removal moves every memory shard on.
            let memoryRemoval = memory.removeAllDeferringRemovals(taggedWith: tag)
            remote?.removeAll(taggedWith: bytes)
            return memoryRemoval
        }
        memory.finish(removedEntries, report)
        return disk == nil ? memoryCount : removed
    }

    /// ``insert(_:forKey:cost:expiresAfter:)``, keeping the value `staleFor` past its expiry in
    /// both tiers, to be served stale (``Freshness/staleIfError``).
    ///
    /// A load's result (`flight`: the run that loaded it) is stored only if no write or removal
    /// covered the key since the load began, and no tag it carries was removed since
    /// (``LoadCoalescer/isSuperseded(_:flight:storing:)``): an older value never replaces a newer
    /// write, nor brings back a removed entry. Any other store supersedes the key's load under
    /// way. Returns whether the value was stored.
    @discardableResult
    func store(
        _ value: Value, forKey key: Key, cost: Int?, expiresAfter: Duration?, staleFor: Duration?,
        tags tagSet: Set<String> = [], flight: UInt64? = nil, toRemote: Bool = true,
        remoteAbsentSince: UInt64? = nil, loadStamp: UInt64? = nil, lifetime fixedLifetime: Lifetime? = nil
    ) -> Bool {
        guard !isClosed.value else {
            record(CacheError.closed, "insert")
            return false
        }
        let tags: EntryTags
        do {
            tags = tagSet.isEmpty ? .none : try EntryTags(tagSet)
        } catch {
            // Not stored. An insert is a removal then: the value the key held must not outlive
            // a write that failed. A load's result is simply not cached (as with `isCacheable`).
            if flight == nil { removeValue(forKey: key) }
            record(error, "insert")
            return false
        }
        guard let disk else {
            let cost = cost ?? configuration.memory.weigher?(value) ?? 0
            var stored = false
            let (removed, report) = writeLocks.withLock(for: key) { () -> (RemovedEntries<Key, Value>, ShardReport?) in
                if let flight {
                    if loads.isSuperseded(key, flight: flight, storing: tags) { return (RemovedEntries(), nil) }
                    loads.supersede(key, before: flight)
                } else {
                    loads.supersede(key)
                }
                stored = true
                let now = memory.now
                let lifetime = fixedLifetime ?? Lifetime(now: now, expiresAfter: expiresAfter, staleFor: staleFor)
                return memory.insertDeferringRemovals(
                    value, forKey: key, cost: cost, expires: lifetime.memoryExpires,
                    servedUntil: lifetime.memoryServedUntil, now: now, tags: tags)
            }
            memory.finish(removed, report)
            return stored
        }
        let bytes = key.cacheKeyBytes
        let replacesDiskOnly =
            listener != nil && !memory.contains(key) && (try? disk.containsData(forKey: bytes)) == true
        // The codec and the weigher are user code, and compression is the costly half of a disk
        // write: all run before taking the key's lock.
        var diskFailure: (any Error)?
        var encodedCount = 0
        var prepared: DiskCache.PreparedWrite?
        var remoteRecord: (bytes: [UInt8], keepUntil: UInt64)?
        do {
            let encoded: [UInt8]
            do {
                encoded = try codec.encode(value)
            } catch let error as CacheError {
                throw error
            } catch {
                throw CacheError.codecFailed(operation: "encode", reason: "\(error)")
            }
            encodedCount = encoded.count
            let now = disk.configuration.clock.milliseconds
            let lifetime = fixedLifetime ?? Lifetime(now: now, expiresAfter: expiresAfter, staleFor: staleFor)
            prepared = try disk.prepareWrite(
                encoded, forKey: bytes, now: now, expires: lifetime.expires, staleUntil: lifetime.staleUntil,
                tags: tags)
            if remote != nil && toRemote {
                remoteRecord = (
                    try RemoteRecord.encode(
                        encoded, forKey: bytes, now: now, expires: lifetime.expires, staleUntil: lifetime.staleUntil,
                        tags: tags, configuration: disk.configuration),
                    lifetime.staleUntil != 0 ? lifetime.staleUntil : lifetime.expires
                )
            }
        } catch {
            diskFailure = error
        }
        let memoryCost = cost ?? configuration.memory.weigher?(value) ?? encodedCount
        var diskReplaced = false
        var stored = false
        let (removed, report) = writeLocks.withLock(for: key) { () -> (RemovedEntries<Key, Value>, ShardReport?) in
            if let flight {
                if loads.isSuperseded(key, flight: flight, storing: tags) { return (RemovedEntries(), nil) }
                loads.supersede(key, before: flight)
            } else {
                loads.supersede(key)
            }
            stored = true
            do {
                guard let prepared else { throw diskFailure ?? CacheError.closed }
                try disk.enqueue(prepared, origin: origin)
                diskReplaced = replacesDiskOnly
            } catch {
                diskFailure = error
                // The disk refused the value (too large, not encodable): the one it would have
                // replaced must not outlive the new one in memory, nor come back after a restart.
                if (try? disk.removeData(forKey: bytes, origin: origin)) != nil { diskReplaced = replacesDiskOnly }
            }
            // Under the key's lock: the remote tier gets one key's writes and removals in order.
            // A value the disk refused is not sent; its key is removed there as here.
            if let remote, toRemote {
                if diskFailure == nil, let remoteRecord {
                    remote.write(
                        remoteRecord.bytes, forKey: bytes, keepUntil: remoteRecord.keepUntil, tags: tags.bytes,
                        absentSince: remoteAbsentSince, loadStamp: loadStamp)
                } else {
                    remote.remove(forKey: bytes)
                }
            }
            let now = memory.now
            let lifetime = fixedLifetime ?? Lifetime(now: now, expiresAfter: expiresAfter, staleFor: staleFor)
            return memory.insertDeferringRemovals(
                value, forKey: key, cost: memoryCost, expires: lifetime.memoryExpires,
                servedUntil: lifetime.memoryServedUntil, now: now, tags: tags)
        }
        if stored, let diskFailure { record(diskFailure, "insert") }
        if diskReplaced { listener?(CacheRemoval(key: key, value: nil, reason: .replaced, tier: .disk)) }
        memory.finish(removed, report)
        return stored
    }

    /// The live value for `key` on get; on set, inserts with the default cost and no expiry, or
    /// removes the entry when set to nil.
    public subscript(key: Key) -> Value? {
        get { value(forKey: key) }
        set {
            if let newValue { insert(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Removes the entry for `key` from both tiers.
    public func removeValue(forKey key: Key) {
        guard let disk, !isClosed.value else {
            let (_, removed, report) = writeLocks.withLock(for: key) {
                loads.supersede(key)
                return memory.removeValueDeferringRemovals(forKey: key)
            }
            memory.finish(removed, report)
            return
        }
        let bytes = key.cacheKeyBytes
        let onDiskOnly = listener != nil && !memory.contains(key) && (try? disk.containsData(forKey: bytes)) == true
        var diskFailure: (any Error)?
        let (_, removed, report) = writeLocks.withLock(for: key) {
            loads.supersede(key)
            do { try disk.removeData(forKey: bytes, origin: origin) } catch { diskFailure = error }
            // Under the key's lock: the remote tier gets one key's writes and removals in order.
            remote?.remove(forKey: bytes)
            return memory.removeValueDeferringRemovals(forKey: key)
        }
        if let diskFailure {
            record(diskFailure, "remove")
        } else if onDiskOnly {
            listener?(CacheRemoval(key: key, value: nil, reason: .explicit, tier: .disk))
        }
        memory.finish(removed, report)
    }

    /// True when either tier holds a live value for `key`. Not an access.
    public func contains(_ key: Key) -> Bool {
        if memory.contains(key) { return true }
        guard let disk else { return false }
        return (try? disk.containsData(forKey: key.cacheKeyBytes)) ?? false
    }

    /// Removes every entry from both tiers. The listener hears of the memory tier's entries.
    ///
    /// Writes to the cache wait for it, so each lands wholly before or wholly after it, in both
    /// tiers; loads under way are not stored.
    public func removeAll() {
        // Under every key's lock: loads under way started before this, and their results must
        // not come back afterwards (no load is between its check and its store); no insert is
        // between its disk enqueue and its memory insert.
        let (removed, report) = writeLocks.withAllLocks {
            loads.supersedeAll()
            if let disk {
                do { try disk.removeAll(origin: origin) } catch { record(error, "remove all") }
            }
            let memoryRemoval = memory.removeAllDeferringRemovals()
            remote?.removeAll()
            return memoryRemoval
        }
        memory.finish(removed, report)
    }
}
