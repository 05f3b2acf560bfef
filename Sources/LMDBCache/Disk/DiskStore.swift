import Foundation
import LMDBCacheStorage
import Logging
import Metrics
import Synchronization

// How a value travels, file by file.
//
// A read, `cache["k"]`:
//   Cache/Cache.swift           `value(forKey:)` asks the memory tier (Memory/MemoryCache.swift,
//                               MemoryShard.swift); on a miss, `diskValue` asks the disk tier.
//   Disk/DiskCache.swift        `entry(forKey:)`: the key becomes a StorageKey (StorageKey.swift),
//                               the clock gives `now`, and the store is asked.
//   Disk/DiskStore+Reads.swift  `lookUp`: a write still queued (PendingWrites.swift) wins; else
//   Disk/StoreEnvironment.swift `read` (errors become CacheError here) asks the storage layer:
//   LMDBCacheStorage/           Environment.swift's `read` lends a pooled read transaction, and
//                               Transaction.swift's `get` returns the record's bytes from the LMDB
//                               page (no copy).
//   Disk/Record.swift           `read` checks checksum, key and expiry and inflates the value
//                               (Deflate.swift, libdeflate).
//   Disk/DiskStore+Reads.swift  `noteRead`: RecentAccesses.swift says whether the use on record
//                               is old enough to record; if so it is queued for the writer.
//   back up                     Cache decodes the value and promotes it to memory.
//
// A write, `cache["k"] = v`:
//   Cache/Cache.swift           `insert` encodes with the codec, then
//   Disk/DiskCache.swift        `prepareWrite` builds the record (Record.swift, Deflate.swift),
//                               or leaves a value to deflate to the writer (PendingWrites.swift);
//                               under the key's lock the memory tier is set and `enqueue` called.
//   Disk/DiskStore+Writes.swift `enqueue` adds it to PendingWrites and wakes the writer thread
//                               (LMDBCacheStorage/WriterThread.swift), which runs `drain`: each
//                               batch is one `write` transaction (LMDBCacheStorage/Environment.swift,
//                               through Disk/StoreEnvironment.swift), where `apply` (DiskStore+Batch.swift) puts
//   Disk/DiskDatabases.swift    the record and its index entries (records, access, expiry) and
//                               updates Totals.swift.
//   Disk/DiskStore+Trimming.swift  a batch past the limits is followed by a trim, whose
//   Disk/DiskStore+Evictions.swift evictions are counted and told to observers (Cache's listener).
//
// Only the DiskStore*.swift files name `env`, `db` or a transaction; DiskCache and everything
// above speak to the store through its methods.

/// The disk tier of one directory in this process, shared by every ``DiskCache`` handle on it.
///
/// Callers encode records on their own threads and queue them in ``PendingWrites``; the
/// environment's writer thread commits the queue in batches (one transaction each), together with
/// the access times reads have collected, then trims to the low-water mark when a limit is passed.
/// Reads look at the queue first, then at LMDB through a pooled read transaction.
///
/// The one owner of the store's LMDB reads and writes, split by job: opening and closing here;
/// the queue and its commits in `DiskStore+Writes.swift`, what a commit does in its transaction
/// in `DiskStore+Batch.swift`; trimming in `DiskStore+Trimming.swift`;
/// eviction events and metrics in `DiskStore+Evictions.swift`; reads, compaction, inspection and
/// verification in files of their own. Members that look private are internal only for those files.
final class DiskStore: Sendable {
    /// The store's environment, through the boundary that turns Storage's errors into CacheErrors.
    let env: StoreEnvironment
    /// The opened cache directory; every file of the store is reached through it.
    let directory: StoreDirectory
    /// The directory as the caller named it, for messages.
    let path: String
    let db: DiskDatabases
    let state = Locked(PendingWrites())
    /// `state.pendingKeyCount`, readable without the lock: most reads find no queued write and
    /// skip the lock. A thread's own writes are counted before its next read (program order).
    let pendingKeys = Atomic<Int>(0)
    /// Broadcast after every batch, so flushes, synchronous writes and full queues can wait.
    let progress = NSCondition()
    /// The access index key the next sweep of stale entries starts at (nil: the front), in this
    /// process only (DiskStore+AccessIndex.swift).
    let accessSweepPosition = Locked<[UInt8]?>(nil)
    let logger: Logger
    let damagedRecords = Counter(label: "lmdbcache_disk_damaged_records_total")
    /// Told of every entry trimming evicts, on `evictionQueue`, keyed by a token.
    let evictionObservers = Locked<(next: UInt64, observers: [UInt64: EvictionObserver])>((0, [:]))
    let evictionQueue = DiskStore.makeEvictionQueue()
    /// Marks an eviction queue with its own identity, so code running on it can tell.
    static let evictionQueueKey = DispatchSpecificKey<ObjectIdentifier>()
    let failedWrites = Counter(label: "lmdbcache_disk_failed_writes_total")
    /// Queued writes dropped because their batch failed (a full disk), for ``Cache/statistics``.
    let droppedWrites = Atomic<Int>(0)
    let evictionMetrics = DiskEvictionMetrics()
    /// Access updates committed: each moves one entry in the access order (two small writes).
    let accessUpdates = Counter(label: "lmdbcache_disk_access_updates_total")
    /// The uses of entries this process recorded lately (``noteRead(_:created:now:granularity:ageLimit:)``).
    let recentAccesses = RecentAccesses()
    /// The last access time of the store's least recently used entry as of the last commit, trim,
    /// open or refresh by a read (milliseconds since 1970; 0 for an empty store).
    let oldestAccess = Atomic<UInt64>(0)
    /// When a read last refreshed ``oldestAccess`` (the reading handle's clock, milliseconds).
    let oldestAccessRefreshed = Atomic<UInt64>(0)

    /// Most writes committed in one transaction.
    static let maxBatchWrites = 1_000
    /// Most bytes committed in one transaction (LMDB caps a transaction's dirty pages).
    static let maxBatchBytes = 64 << 20
    /// Most entries one trim transaction removes, so a trim never holds the writer long.
    static let trimBatchSize = 256
    /// Most removals per transaction of an emergency trim on a full volume: every transaction
    /// copies the pages it changes, and the pages it frees are reusable only two transactions
    /// later, so small transactions are what fit in the space reserve.
    static let emergencyTrimBatchSize = 16
    /// Buffered access times that make the writer commit them without waiting for a write.
    static let accessBatchSize = 1_000
    /// Most access times one transaction records. Each moves an entry in two indexes ordered by
    /// time and by key, touching pages all over both, so a transaction copies and syncs about as
    /// many pages for a few thousand as for one thousand: a writer that fell behind catches up in
    /// larger transactions.
    static let maxAccessesPerBatch = 16_384
    /// Most access times buffered; later ones are dropped until the writer catches up.
    static let maxBufferedAccesses = 100_000

    static let registry = DirectoryRegistry<DiskStore>()

    /// For ``DiskCache/Durability/periodic(syncInterval:)``: how often the writer syncs.
    let syncInterval: Duration?
    /// For ``DiskCache/Durability/periodic(syncInterval:)``: the bytes of pages freed since the
    /// last sync (none reused before the next) at which the writer syncs before the interval ends.
    let freedBytesBeforeSync: Int
    let syncScheduled = Locked(false)
    let reserve: SpaceReserve
    let presence: ProcessPresence

    init(
        directory: StoreDirectory, options: Environment.Options, syncInterval: Duration?, freedBytesBeforeSync: Int,
        logger: Logger
    ) throws {
        // Presence first: a process compacting or setting the file aside holds it exclusively, and
        // LMDB must not map the file until that is over.
        let presence = try storage {
            try ProcessPresence(
                directory: directory, readOnly: options.readOnly, timeout: options.openTimeout, logger: logger)
        }
        self.presence = presence
        do {
            let raw = try storage {
                try Environment.open(directory: directory, options: options, presence: presence, logger: logger)
            }
            env = StoreEnvironment(raw: raw)
        } catch {
            presence.close()
            throw error
        }
        self.directory = directory
        path = directory.path
        self.syncInterval = syncInterval
        self.freedBytesBeforeSync = freedBytesBeforeSync
        db = DiskDatabases(env.databases)
        self.logger = logger
        isReadOnly = options.readOnly
        reserve = SpaceReserve(directory: directory)
        if !isReadOnly { reserve.take() }
        do {
            // A read first: an open of a store in the current format takes no write transaction,
            // so another process holding LMDB's writer lock (a stopped `cache-dump put`) cannot
            // hold it up.
            let stored = try env.read { txn in
                oldestAccess.store(try oldestAccessTime(txn), ordering: .relaxed)
                return try Totals.load(txn, db.info, Totals.formatKey)
            }
            try checkFormat(stored)
            if !isReadOnly && stored < UInt64(Record.formatVersion) {
                try env.writer.sync {
                    try env.write { txn in
                        let stored = try Totals.load(txn, db.info, Totals.formatKey)
                        try checkFormat(stored)
                        // Older versions of the library must not read this format's records, so the
                        // store says which format it now holds.
                        if stored < UInt64(Record.formatVersion) {
                            try Totals.store(txn, db.info, Totals.formatKey, UInt64(Record.formatVersion))
                        }
                    }
                }
            }
        } catch {
            env.close()
            presence.close()
            throw error
        }
    }

    /// True when opened only to inspect the store (`cache-dump`): nothing is ever written.
    let isReadOnly: Bool

    /// Refuses a store written in a newer record format. `stored` comes from the file: a damaged
    /// value past `Int.max` is reported as `Int.max`.
    private func checkFormat(_ stored: UInt64) throws {
        if stored > UInt64(Record.formatVersion) {
            throw CacheError.unsupportedFormat(
                path: path, found: Int(clamping: stored), supported: Int(Record.formatVersion))
        }
    }

    /// Commits everything queued, syncs, and closes the environment. The last handle calls it.
    func close() {
        if !isReadOnly { try? commitAndSync() }
        env.close()
        // A closed store no longer counts as a process on it, even while handles still refer to it.
        presence.close()
    }
}
