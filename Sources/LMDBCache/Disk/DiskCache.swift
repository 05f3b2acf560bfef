import Foundation
import Glibc
import LMDBCacheStorage
import Logging

/// A persistent key-value cache of byte values in one directory, on LMDB.
///
/// Values are stored as checksummed records, deflated when that saves space. Writes are queued and
/// committed in batches by a writer thread (reads see them at once); reads never open a write
/// transaction. Entries are evicted least recently used first, and expired entries are never
/// returned. Several handles, threads and processes may use one directory at once.
///
/// ```swift
/// let disk = try DiskCache(directory: dir, configuration: .init(costLimit: 256 << 20))
/// try disk.setData([UInt8](payload), forKey: "k")
/// let bytes: [UInt8]? = try disk.data(forKey: "k")
/// ```
public final class DiskCache: Sendable {
    /// The cache directory.
    public let directory: URL
    /// The configuration the cache was opened with.
    public let configuration: Configuration
    let store: DiskStore
    let identity: DirectoryIdentity
    let logger: Logger
    let limits: DiskLimits
    /// Held shared by every call and exclusive by `close()`, so closing waits for running calls.
    let gate = ReadWriteLock()
    let isClosed = LockedFlag()
    let scheduler = Locked<TrimScheduler?>(nil)
    /// Names this handle's changes in the store's change log (``CacheChange/origin``): 0 for a
    /// handle of its own, whose changes every ``Cache`` on the directory applies; the origin of
    /// the ``Cache`` whose disk tier it is, so that writing to ``Cache/disk`` directly bypasses
    /// that cache's memory tier, as it always did, and reaches the others'.
    let origin: UInt64

    /// Opens (creating when missing, owner-only) the cache in `directory`.
    ///
    /// - Throws: ``CacheError/directoryUnavailable(path:reason:)`` when the directory cannot be
    ///   created or used, ``CacheError/damagedStore(path:reason:)`` when the store is damaged and
    ///   the configuration says to fail, ``CacheError/unsupportedFormat(path:found:supported:)``.
    public convenience init(
        directory: URL, configuration: Configuration = .init(),
        logger: Logger = .lmdbCacheDefault
    ) throws {
        try self.init(directory: directory, configuration: configuration, logger: logger, origin: 0)
    }

    /// ``init(directory:configuration:logger:)`` for the disk tier of a ``Cache`` whose origin is
    /// `origin`.
    init(directory: URL, configuration: Configuration, logger: Logger, origin: UInt64) throws {
        self.origin = origin
        let path = directory.standardizedFileURL.path
        self.directory = directory
        self.configuration = configuration
        self.logger = logger
        limits = configuration.limits
        // The registry opens the directory (StoreDirectory) and waits for a closing store: its
        // StorageErrors become CacheErrors here; DiskStore's init converts its own.
        (store, identity) = try storage {
            try DiskStore.registry.acquire(
                directory: path, existing: configuration.readOnly, timeout: configuration.openTimeout
            ) {
                directory in
            if configuration.readOnly {
                var info = stat()
                guard fstatat(directory.descriptor, StoreFiles.data, &info, AT_SYMLINK_NOFOLLOW) == 0 else {
                    throw CacheError.directoryUnavailable(path: path, reason: "not a cache directory (no data.mdb)")
                }
            }
            return try DiskStore(
                directory: directory, options: configuration.environmentOptions,
                syncInterval: configuration.durability.syncInterval,
                freedBytesBeforeSync: configuration.freedBytesBeforeSync, logger: logger)
            }
        }
        if !configuration.readOnly, let permissions = store.directory.permissionsOpenToOthers {
            logger.warning(
                "LMDBCache directory is open to other users; 0700 keeps its files private",
                metadata: ["path": .escaped(path), "mode": "\(String(permissions, radix: 8))"])
        }
        if configuration.automaticTrimming && !configuration.readOnly {
            let scheduler = TrimScheduler(tier: .disk, interval: configuration.autoTrimInterval, logger: logger) {
                [weak self] in self?.trimPass() ?? 0
            }
            self.scheduler.withLock { $0 = scheduler }
        }
    }

    deinit {
        close()
    }

    // MARK: Trimming

    /// Removes expired entries, then least recently used ones until at most `count` remain.
    ///
    /// - Complexity: O(k log n) for k entries removed; done in transactions of at most 256 removals.
    public func trim(toCount count: Int) throws {
        try trim(DiskStore.TrimPlan(count: max(0, count)))
    }

    /// Removes expired entries, then least recently used ones until at most `cost` bytes remain.
    ///
    /// - Complexity: O(k log n) for k entries removed; done in transactions of at most 256 removals.
    public func trim(toCost cost: Int) throws {
        try trim(DiskStore.TrimPlan(cost: max(0, cost)))
    }

    /// Removes expired entries and those not accessed for `age` or longer.
    ///
    /// - Complexity: O(k log n) for k entries removed; done in transactions of at most 256 removals.
    public func trim(toAge age: Duration) throws {
        let now = configuration.clock.milliseconds
        try trim(DiskStore.TrimPlan(accessedBefore: now.cutoff(forAge: age)))
    }

    /// Removes expired entries only.
    public func removeExpired() throws {
        try trim(DiskStore.TrimPlan())
    }

    /// One pass of the trimming scheduler: commits queued writes and buffered access times, then
    /// removes expired entries, entries idle past the age limit, and, when the count or cost
    /// limit is passed, least recently used entries down to the low-water mark. Works in
    /// transactions of at most 256 removals with queued writes committed between them, so writers
    /// wait for one such transaction at most; readers never wait (LMDB readers do not block on the
    /// writer). Returns the entries removed; a failure is logged and the pass ends.
    @discardableResult
    func trimPass() -> Int {
        do {
            return try withStore { try $0.trimPass(limits: limits, ageLimit: configuration.ageLimit) }
        } catch CacheError.closed {
            return 0
        } catch {
            logger.info(
                "LMDBCache trim pass failed", metadata: ["path": .escaped(directory.path), "error": .escaped(error)])
            return 0
        }
    }

    /// The running trimming scheduler, if any (tests wait on its passes).
    var trimScheduler: TrimScheduler? {
        scheduler.withLock { $0 }
    }

    func trim(_ plan: DiskStore.TrimPlan) throws {
        try withStore { store in
            let now = configuration.clock.milliseconds
            try store.commitQueueAndTrim(plan, now: now)
        }
    }

    // MARK: Compaction

    /// Rewrites the store's file without its free pages and swaps the copy in atomically, so the
    /// file shrinks to about the size of the live data (LMDB reuses freed pages but never gives
    /// them back to the volume by itself).
    ///
    /// Commits queued writes first. Reads and writes of this process wait while the copy is
    /// swapped in; the copy itself runs beside reads. Needs free space on the volume for the copy.
    ///
    /// - Throws: ``CacheError/storeInUse(path:operation:)`` while another process has the store
    ///   open, ``CacheError/closed``, or the copy's failure (the original is then untouched).
    public func compact() throws {
        try withStore { try $0.compact() }
    }

    /// Bytes of the store's data file on disk (free pages included).
    public var fileSize: Int {
        (try? withStore { $0.fileSize }) ?? 0
    }

    // MARK: Totals and lifecycle

    /// Entries stored, as of the last commit (call ``flush()`` first to count queued writes).
    /// Exact across threads and processes. 0 once closed.
    public var totalCount: Int {
        (try? withStore { try $0.totals().count }) ?? 0
    }

    /// Bytes stored (each entry's stored key and record), as of the last commit. 0 once closed.
    public var totalCost: Int {
        (try? withStore { try $0.totals().bytes }) ?? 0
    }

    /// Commits every write queued so far and syncs it to disk.
    ///
    /// - Throws: the first write failure since the previous flush (the failed batch was dropped),
    ///   or ``CacheError/closed``.
    public func flush() throws {
        try withStore { try $0.flush() }
    }

    /// Flushes, then closes this handle; the directory's store closes with its last handle.
    /// Later calls throw ``CacheError/closed``. Calling it again does nothing.
    public func close() {
        // First, and outside the gate: a pass under way holds the gate shared.
        scheduler.withLock { $0 }?.stop()
        gate.withExclusiveLock {
            guard isClosed.set() else { return }
            do {
                try store.flush()
            } catch {
                logger.error("LMDBCache could not flush on close", metadata: ["error": .escaped(error)])
            }
            DiskStore.registry.release(identity) { $0.close() }
        }
    }

    // MARK: For the two-tier cache

    /// Queued writes the store dropped so far because their batch failed (a full disk), whichever
    /// handle queued them; the store outlives a handle, so callers count from their own start.
    var droppedWriteCount: Int { store.droppedWriteCount }

    /// Starts telling `observer` of the entries trimming evicts (on a queue of the store's own,
    /// never the writer thread); returns the token that stops it.
    func observeEvictions(_ observer: @escaping DiskStore.EvictionObserver) -> UInt64 {
        store.observeEvictions(observer)
    }

    /// Stops the observer `token` names.
    func stopObservingEvictions(_ token: UInt64) {
        store.stopObservingEvictions(token)
    }

    /// Waits until every eviction event published so far has been delivered.
    func waitForEvictionEvents() {
        store.waitForEvictionEvents()
    }

    func withStore<T>(_ body: (DiskStore) throws -> T) throws -> T {
        gate.lockShared()
        defer { gate.unlockShared() }
        guard !isClosed.value else { throw CacheError.closed }
        return try body(store)
    }
}

// MARK: - String keys

/// String keys are stored as their ``CacheKey`` bytes (the UTF-8 of their NFC form), as the
/// two-tier cache stores them: canonically equal strings are one key, in either API.
extension DiskCache {
    /// Stores `value` under `key`'s ``CacheKey/cacheKeyBytes`` (the UTF-8 of its NFC form).
    public func setData(_ value: [UInt8], forKey key: String, expiresAfter: Duration? = nil) throws {
        try setData(value, forKey: key.cacheKeyBytes, expiresAfter: expiresAfter)
    }

    /// Stores `value` with `tags` under `key`'s ``CacheKey/cacheKeyBytes`` (the UTF-8 of its NFC form).
    public func setData(_ value: [UInt8], forKey key: String, expiresAfter: Duration? = nil, tags: Set<String>) throws {
        try setData(value, forKey: key.cacheKeyBytes, expiresAfter: expiresAfter, tags: tags)
    }

    /// The value stored under `key`'s ``CacheKey/cacheKeyBytes`` (the UTF-8 of its NFC form).
    public func data(forKey key: String) throws -> [UInt8]? {
        try data(forKey: key.cacheKeyBytes)
    }

    /// True when a live value is stored under `key`'s ``CacheKey/cacheKeyBytes``.
    public func containsData(forKey key: String) throws -> Bool {
        try containsData(forKey: key.cacheKeyBytes)
    }

    /// Removes the value stored under `key`'s ``CacheKey/cacheKeyBytes``.
    public func removeData(forKey key: String) throws {
        try removeData(forKey: key.cacheKeyBytes)
    }
}
