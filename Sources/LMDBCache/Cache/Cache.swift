import Foundation
import Logging

/// A two-tier cache: a ``MemoryCache`` in front of a ``DiskCache``, with values encoded by a
/// ``ValueCodec``.
///
/// Lookups try memory, then disk; a disk hit is decoded once and promoted to memory. Inserts
/// go to both tiers: memory at once, disk through the write-behind queue (reads see queued writes,
/// so a value read right after its insert is that value). Removals clear both tiers.
///
/// ```swift
/// let cache = try Cache<String, Article>(
///     directory: URL(fileURLWithPath: "/var/cache/myservice/articles"),
///     configuration: .init(
///         memory: .init(countLimit: 10_000, costLimit: 64 << 20, ageLimit: .seconds(300)),
///         disk: .init(countLimit: nil, costLimit: 1 << 30, ageLimit: .seconds(30 * 86_400),
///                     freeSpaceLimit: 512 << 20)))
/// cache["a1"] = article
/// let fresh = try await cache.value(forKey: "a3") { try await api.article(id: "a3") }
/// ```
///
/// Inserts and lookups do not throw: a value the codec cannot encode, or the disk refuses, stays
/// in memory only (the value it replaced is removed from disk), a disk write that fails is logged
/// and counted, and ``flush()`` throws the first such failure. An insert or removal changes both
/// tiers as one step per key, so concurrent writers of a key leave the tiers agreeing.
/// Safe to use from any thread or task.
public final class Cache<Key: CacheKey, Value: Sendable>: Sendable {
    /// Called once for every entry that leaves a tier, with the tier, after the cache's locks are
    /// released: on the removing thread for the memory tier and for explicit removals, on a
    /// queue of the disk tier's for entries trimming evicts from disk.
    public typealias RemovalListener = @Sendable (CacheRemoval<Key, Value>) -> Void

    /// The configuration the cache was opened with.
    public let configuration: Configuration
    /// The memory tier. Writing to it directly bypasses the disk tier.
    public let memory: MemoryCache<Key, Value>
    /// The disk tier; nil for a memory-only cache. Writing to it directly bypasses the memory tier.
    public let disk: DiskCache?
    let codec: any ValueCodec<Value>
    private let logger: Logger
    private let listener: RemovalListener?
    private let counters: CacheCounters
    let loads: LoadCoalescer<Key, Value>
    /// The first write failure since the last ``flush()``.
    private let failure = Locked<(any Error)?>(nil)
    private let evictionToken: UInt64?
    /// The disk store's dropped-write count when this cache opened (the store may outlive it).
    private let droppedWritesAtOpen: Int
    private let isClosed = LockedFlag()
    /// Make each insert and removal one step in both tiers, per key.
    private let writeLocks: KeyWriteLocks
    /// Names this cache's changes in the directory's change log (``CacheChange/origin``):
    /// random, nonzero.
    let origin = UInt64.random(in: 1...UInt64.max)
    /// Follows the change log (``Configuration/coherence``); nil without a disk tier or with
    /// coherence off.
    private let follower: ChangeFollower?
    /// The remote tier's store (``Configuration/remote``); nil without one.
    let remote: (any RemoteStore)?
    /// Applies the changes other machines publish through the remote tier to both local tiers.
    private let remoteFollower: ChangeFollower?
    /// The remote follower, for the store to wake when changes arrive; emptied on close (the store
    /// holds the closure that reads it).
    private let remoteWake = Locked<ChangeFollower?>(nil)

    /// Opens (creating when missing, owner-only) a two-tier cache whose disk tier lives in
    /// `directory`.
    ///
    /// - Parameters:
    ///   - directory: the disk tier's directory, created (mode 0700) when missing.
    ///   - configuration: both tiers' limits and the codec.
    ///   - logger: where the cache logs, at info level and below; nothing is logged by default.
    ///     Keys, paths and error messages appear in its metadata escaped (control characters,
    ///     bidi controls and line separators as `\n` or `\u{XXXX}`) and cut short (a key after
    ///     64 characters, other text after 1,024), as in ``CacheError/description``.
    ///   - removalListener: called with each entry that leaves a tier and why.
    /// - Throws: what ``DiskCache/init(directory:configuration:logger:)`` throws.
    public init(
        directory: URL, configuration: Configuration,
        logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) throws {
        self.configuration = configuration
        self.logger = logger
        codec = configuration.codec
        listener = removalListener
        let counters = CacheCounters(name: configuration.name ?? directory.lastPathComponent)
        self.counters = counters
        let reading = ClockReading(configuration.timeoutClock)
        let loads = LoadCoalescer<Key, Value>(now: { reading.elapsed })
        self.loads = loads
        let writeLocks = KeyWriteLocks()
        self.writeLocks = writeLocks
        memory = MemoryCache(
            configuration: configuration.memoryWithClock, removalListener: removalListener,
            metrics: counters.memoryMetrics, logger: logger)
        let disk = try DiskCache(
            directory: directory, configuration: configuration.diskWithClock, logger: logger, origin: origin)
        self.disk = disk
        droppedWritesAtOpen = disk.droppedWriteCount
        if let interval = configuration.coherence.pollInterval {
            let follower: ChangeFollower
            do {
                follower = ChangeFollower(
                    feed: try DiskChangeLog(disk: disk), origin: origin,
                    target: Self.followerTarget(memory, loads: loads, writeLocks: writeLocks),
                    cacheName: configuration.name ?? directory.lastPathComponent,
                    logger: logger)
            } catch {
                disk.close()
                throw error
            }
            follower.start(interval: interval)
            self.follower = follower
        } else {
            follower = nil
        }
        if let tier = configuration.remote {
            let name = configuration.name ?? directory.lastPathComponent
            let store: any RemoteStore
            do {
                let wake = remoteWake
                store = try tier.open(
                    RemoteContext(
                        origin: origin, cacheName: name, logger: logger,
                        changesArrived: { wake.withLock { $0 }?.wake() }))
            } catch {
                follower?.stop()
                disk.close()
                throw error
            }
            let remoteFollower = ChangeFollower(
                feed: store.feed, origin: origin,
                target: Self.remoteFollowerTarget(
                    memory, disk: disk, origin: origin, loads: loads, writeLocks: writeLocks, logger: logger,
                    dropsDisk: store.dropsDiskTierOnMissedChanges),
                cacheName: name, logger: logger)
            // The store wakes it when messages arrive; the timer is the backstop.
            remoteFollower.start(interval: configuration.coherence.pollInterval ?? .milliseconds(5))
            remoteWake.withLock { $0 = remoteFollower }
            remote = store
            self.remoteFollower = remoteFollower
        } else {
            remote = nil
            remoteFollower = nil
        }
        evictionToken = disk.observeEvictions { evictions in
            for eviction in evictions {
                counters.diskRemoval(eviction.reason)
                guard let removalListener, let key = Key(cacheKeyBytes: eviction.key) else { continue }
                removalListener(CacheRemoval(key: key, value: nil, reason: eviction.reason, tier: .disk))
            }
        }
    }

    /// A memory-only cache: the same API without a disk tier.
    public init(
        memory configuration: MemoryCache<Key, Value>.Configuration,
        logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) {
        self.configuration = Configuration(memory: configuration, codec: UnusedCodec())
        self.logger = logger
        codec = UnusedCodec()
        listener = removalListener
        counters = CacheCounters(name: "memory")
        let reading = ClockReading(self.configuration.timeoutClock)
        loads = LoadCoalescer<Key, Value>(now: { reading.elapsed })
        writeLocks = KeyWriteLocks()
        memory = MemoryCache(
            configuration: configuration, removalListener: removalListener, metrics: counters.memoryMetrics,
            logger: logger)
        disk = nil
        droppedWritesAtOpen = 0
        evictionToken = nil
        follower = nil
        remote = nil
        remoteFollower = nil
    }

    /// What the change follower does to `memory`: drops entries (the listener hears of them as
    /// explicit removals), each a removal that stops a concurrent promotion (see ``ChangeFollower``),
    /// and supersedes the loads under way for them, as this cache's own writes do: a load that
    /// read its source before another process's write must not store its older value over it.
    private static func followerTarget(
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
    private static func dropMemoryTier(
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
    private static func remoteFollowerTarget(
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

    deinit {
        close()
    }

    // MARK: Values

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

    // MARK: Trimming

    /// Trims each tier to at most `count` entries, least recently used first.
    public func trim(toCount count: Int) {
        memory.trim(toCount: count)
        disk.map { disk in perform("trim") { try disk.trim(toCount: count) } }
    }

    /// Trims each tier to at most `cost` (memory: its cost; disk: bytes), least recently used first.
    public func trim(toCost cost: Int) {
        memory.trim(toCost: cost)
        disk.map { disk in perform("trim") { try disk.trim(toCost: cost) } }
    }

    /// Removes entries not read or written for `age` or longer from each tier.
    public func trim(toAge age: Duration) {
        memory.trim(toAge: age)
        disk.map { disk in perform("trim") { try disk.trim(toAge: age) } }
    }

    /// Removes expired entries from each tier.
    public func removeExpired() {
        memory.removeExpired()
        disk.map { disk in perform("trim") { try disk.removeExpired() } }
    }

    // MARK: Statistics and lifecycle

    /// Hits and misses per tier, removals by reason, loads and failures since the cache opened.
    ///
    /// Reading it also brings the metrics' entry and cost gauges up to date.
    public var statistics: CacheStatistics {
        var statistics = counters.statistics(memory: memory.statistics)
        if let follower {
            statistics.invalidationsReceived = follower.received.load(ordering: .acquiring)
            statistics.invalidationsApplied = follower.applied.load(ordering: .relaxed)
            statistics.memoryTierDrops = follower.memoryDrops.load(ordering: .relaxed)
            statistics.invalidationLag = .milliseconds(Int64(clamping: follower.lastLag.load(ordering: .relaxed)))
        }
        if let remote, let remoteFollower {
            var remoteStatistics = remote.statistics
            remoteStatistics.changesReceived = remoteFollower.received.load(ordering: .acquiring)
            remoteStatistics.changesApplied = remoteFollower.applied.load(ordering: .relaxed)
            remoteStatistics.memoryTierDrops = remoteFollower.memoryDrops.load(ordering: .relaxed)
            statistics.remote = remoteStatistics
        }
        if let disk { statistics.failedWrites += disk.droppedWriteCount - droppedWritesAtOpen }
        if let disk, !isClosed.value {
            counters.diskMetrics.entries.set(disk.totalCount)
            counters.diskMetrics.cost.set(disk.totalCost)
        }
        return statistics
    }

    /// Commits every insert and removal so far to disk and syncs it.
    ///
    /// - Throws: the first write failure since the previous flush (a value the codec could not
    ///   encode, a write the disk refused), or ``CacheError/closed``.
    public func flush() throws {
        try disk?.flush()
        if isClosed.value { throw CacheError.closed }
        if let error = failure.withLock({ failure in
            defer { failure = nil }
            return failure
        }) {
            throw error
        }
    }

    /// Flushes, then closes the cache and empties its memory tier (the listener is not told:
    /// nothing was removed from the cache's data). Later calls do nothing and
    /// return nil, or throw ``CacheError/closed`` where they throw. Calling it again does nothing.
    public func close() {
        guard isClosed.set() else { return }
        follower?.stop()
        remoteFollower?.stop()
        remoteWake.withLock { $0 = nil }
        remote?.close()
        if let evictionToken, let disk {
            disk.waitForEvictionEvents()
            disk.stopObservingEvictions(evictionToken)
        }
        memory.stopTrimming()
        disk?.close()
        memory.discardAllAndClose()
    }

    var isClosedForLoading: Bool { isClosed.value }

    /// Runs `body` holding `key`'s write lock (`body` must not call user code).
    func withWriteLock<T>(for key: Key, _ body: () -> T) -> T {
        writeLocks.withLock(for: key, body)
    }

    func countLoad() {
        counters.load()
    }

    func countLoadFailure(_ error: any Error) {
        counters.loadFailure()
        logger.debug("LMDBCache loader failed", metadata: ["error": .escaped(error)])
    }

    func countRefresh(succeeded: Bool) {
        counters.refresh(succeeded: succeeded)
    }

    func countStaleServed(_ reason: StaleReason) {
        counters.staleServed(reason)
    }

    func countLoadTimeout() {
        counters.loadTimeout()
    }

    func countBulkLoad(keys: Int) {
        counters.bulkLoad(keys: keys)
    }

    /// Reads the change log now and applies what other caches changed (for tests: every change
    /// committed before the call is then applied). Does nothing with coherence off.
    package func followChanges() {
        follower?.pollNow()
    }

    /// Waits until the listener has heard of every disk eviction so far (for tests).
    func waitForEvictionEvents() {
        disk?.waitForEvictionEvents()
    }

    // MARK: Failures

    private func perform(_ operation: String, _ body: () throws -> Void) {
        do { try body() } catch { record(error, operation) }
    }

    /// Keeps the first failure for ``flush()``, counts it and logs it.
    private func record(_ error: any Error, _ operation: String) {
        counters.failedWrite()
        failure.withLock { failure in
            if failure == nil { failure = error }
        }
        logger.info("LMDBCache \(operation) failed", metadata: ["error": .escaped(error)])
    }
}

/// The codec of a memory-only cache, which never encodes.
private struct UnusedCodec<Value>: ValueCodec {
    func encode(_ value: Value) throws -> [UInt8] {
        throw CacheError.codecFailed(operation: "encode", reason: "a memory-only cache has no codec")
    }

    func decode(_ bytes: [UInt8]) throws -> Value {
        throw CacheError.codecFailed(operation: "decode", reason: "a memory-only cache has no codec")
    }
}
