import LMDBCacheStorage
import Logging

// What a cache's change followers do to its tiers when another process (through the directory's
// change log) or another machine (through the remote tier) changes a key: the targets the
// followers call, built when the cache opens.

extension Cache {
    /// What the change follower does to `memory`: drops entries (the listener hears of them as
    /// explicit removals), each a removal that stops a concurrent promotion (see ``ChangeFollower``),
    /// and supersedes the loads under way for them, as this cache's own writes do: a load that
    /// read its source before another process's write must not store its older value over it.
    static func followerTarget(
        _ memory: MemoryCache<Key, Value>, loads: LoadCoalescer<Key, Value>, writeLocks: KeyWriteLocks
    ) -> ChangeFollower.Target {
        ChangeFollower.Target(
            dropKey: { bytes in
                // Bytes no key of this type has name no entry of this cache.
                guard let key = Key(cacheKeyBytes: bytes) else { return false }
                let (value, removed, report) = writeLocks.withLock(for: key) {
                    loads.supersede(key)
                    return memory.removeValueDeferringRemovals(forKey: key)
                }
                memory.finish(removed, report)
                return value != nil
            },
            dropTag: { tag in
                // Only the loads the removal covers: those of keys whose entry carried the tag when
                // they began, and any value that would carry it.
                writeLocks.withAllLocks { loads.supersede(taggedWith: tag) }
                let (count, removed, report) = memory.removeAllDeferringRemovals(taggedWithStoredBytes: tag)
                memory.finish(removed, report)
                return count
            },
            dropAll: { dropMemoryTier(memory, loads: loads, writeLocks: writeLocks) },
            missed: { dropMemoryTier(memory, loads: loads, writeLocks: writeLocks) })
    }

    /// Empties the memory tier, superseding every load under way; returns how many entries it held.
    static func dropMemoryTier(
        _ memory: MemoryCache<Key, Value>, loads: LoadCoalescer<Key, Value>, writeLocks: KeyWriteLocks
    ) -> Int {
        writeLocks.withAllLocks { loads.supersedeAll() }
        let count = memory.totalCount
        memory.removeAll()
        return count
    }

    /// What the remote tier's follower does: another machine's change removes the entries it
    /// names from both local tiers (the disk removal logged as this cache's, so the other
    /// processes on this directory follow it through the change log), as the memory follower's
    /// target does for memory; missed changes drop the memory tier, and the disk tier too when the
    /// store asks for it (``RemoteStore/dropsDiskTierOnMissedChanges``).
    static func remoteFollowerTarget(
        _ memory: MemoryCache<Key, Value>, disk: DiskCache, origin: UInt64, loads: LoadCoalescer<Key, Value>,
        writeLocks: KeyWriteLocks, logger: Logger, dropsDisk: Bool
    ) -> ChangeFollower.Target {
        let local = followerTarget(memory, loads: loads, writeLocks: writeLocks)
        return ChangeFollower.Target(
            dropKey: { bytes in
                guard let key = Key(cacheKeyBytes: bytes) else { return false }
                var onDisk = false
                let (value, removed, report) = writeLocks.withLock(for: key) {
                    loads.supersede(key)
                    // Most changes elsewhere name keys this machine does not hold: no disk write
                    // (and no change-log entry) for those.
                    // (A value kept past its expiry for staleIfError counts: it must go too.)
                    onDisk = (try? disk.entry(forKey: bytes, includingStale: true)) != nil
                    do {
                        if onDisk { try disk.removeData(forKey: bytes, origin: origin) }
                    } catch {
                        logger.debug(
                            "LMDBCache could not apply a remote removal to its disk tier",
                            metadata: ["error": .escaped(error)])
                    }
                    return memory.removeValueDeferringRemovals(forKey: key)
                }
                memory.finish(removed, report)
                return value != nil || onDisk
            },
            dropTag: { tag in
                // The loads it covers first: the disk removal below must not come between a load
                // noting the tags it begins with and this.
                writeLocks.withAllLocks { loads.supersede(taggedWith: tag) }
                var count = 0
                do {
                    count = try disk.removeAll(taggedWithStoredBytes: tag, origin: origin)
                } catch {
                    logger.debug(
                        "LMDBCache could not apply a remote tag removal to its disk tier",
                        metadata: ["error": .escaped(error)])
                }
                return count + local.dropTag(tag)
            },
            dropAll: {
                let count = disk.totalCount
                do {
                    try disk.removeAll(origin: origin)
                } catch {
                    logger.debug(
                        "LMDBCache could not apply a remote removal of everything to its disk tier",
                        metadata: ["error": .escaped(error)])
                }
                return count + local.dropAll()
            },
            missed: {
                guard dropsDisk else { return local.missed() }
                let count = disk.totalCount
                do {
                    try disk.removeAll(origin: origin)
                } catch {
                    logger.debug(
                        "LMDBCache could not drop its disk tier after missed remote changes",
                        metadata: ["error": .escaped(error)])
                }
                return count + local.missed()
            })
    }
}
