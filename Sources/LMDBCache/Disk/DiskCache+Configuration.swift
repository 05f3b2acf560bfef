import LMDBCacheStorage

extension DiskCache {
    /// How writes reach the disk.
    public enum Durability: Sendable, Equatable {
        /// `setData` returns once the write is queued; the writer thread commits queued writes in
        /// batches, each commit writing its data pages with `fdatasync` (LMDB's `MDB_NOMETASYNC`).
        /// A killed process loses only writes not yet committed; an OS crash may also lose the
        /// last committed batch, never the store's integrity. `flush()` makes everything durable.
        case batched
        /// `setData` returns once its write is committed and synced (meta page included).
        case synchronous
        /// `setData` returns once the write is queued; commits skip fsync (LMDB's `MDB_NOSYNC`)
        /// and the writer syncs the file once per `syncInterval` (sooner, see below), and on
        /// `flush()` and `close()`. The fastest mode, chiefly on large stores, where each commit's fsync costs
        /// most. A killed process loses only writes not yet committed; an OS crash may lose the
        /// writes committed since the last sync, never those a sync made durable: the first open
        /// after it goes back to the last synced snapshot (kept recoverable until the next sync).
        /// A store found damaged on open is set aside and recreated. Until a sync, LMDB reuses no
        /// page freed since the last one (so that the synced snapshot stays whole), so the writer
        /// also syncs before the interval ends once commits have freed 32 MiB of pages: between
        /// syncs, overwrites grow the file by at most about that much.
        case periodic(syncInterval: Duration)

        var syncInterval: Duration? {
            if case .periodic(let interval) = self { return interval }
            return nil
        }
    }

    /// Limits and settings of a disk cache. `nil` means no limit.
    public struct Configuration: Sendable {
        /// Most entries kept; passing it on write trims down to ``lowWaterMark`` of it.
        public var countLimit: Int?
        /// Most bytes kept, counted as each entry's stored key and record (after compression).
        public var costLimit: Int?
        /// Entries not read or written for this long are removed by trimming (YYCache's meaning).
        public var ageLimit: Duration?
        /// Bytes to keep free on the volume holding the cache. While the volume has less free,
        /// each committed batch of writes is followed by evicting least recently used entries of
        /// as many bytes, so the store stops growing and new writes reuse the pages freed (LMDB's
        /// file never shrinks by itself; see ``DiskCache/compact()``).
        public var freeSpaceLimit: Int?
        /// How often the trimming scheduler checks the limits (YYDiskCache's default: 60 s).
        /// Intervals below 5 ms (zero and negative ones included) run every 5 ms; intervals above
        /// 100 years (`.seconds(Int64.max)`) every 100 years.
        public var autoTrimInterval: Duration
        /// Whether each handle runs its own trimming scheduler (every ``autoTrimInterval``, until
        /// ``DiskCache/close()``). Set it to false when a ``CacheTrimmingService`` trims instead, or
        /// when nothing should. Default true.
        public var automaticTrimming = true
        /// In `.periodic` mode, the bytes of pages freed since the last sync at which the writer
        /// syncs before the interval ends (``Durability/periodic(syncInterval:)``). Internal: the
        /// tests set a small one.
        var freedBytesBeforeSync = 32 << 20
        /// Trimming on write removes entries until count and cost are at this fraction of their
        /// limits, so it does not run on every insert. Default 0.9.
        public var lowWaterMark: Double = 0.9
        /// Values of at least this many bytes are deflated (and kept so only when smaller);
        /// nil stores every value as it is. Default 512.
        public var compressionThreshold: Int? = 512
        /// DEFLATE level, 1 (fastest) to 9 (smallest); other values are taken as the nearest of
        /// these. Default 1.
        public var compressionLevel: Int = 1
        /// When a write counts as done. Default ``Durability/batched``.
        public var durability: Durability = .batched
        /// Map size the store starts with; it grows by itself when full. Default 64 MiB.
        public var initialMapSize: Int = 64 << 20
        /// What to do when the store's file is damaged on open. Default: move it aside, start empty.
        public var damagedStore: DamagedStorePolicy = .recreate
        /// The least a read lets an entry's recorded use lag before it records a new one (for LRU
        /// order). A read records a use only when the one on record is older than this, than an
        /// eighth of the store's access span (from its least recently used entry to now) and than
        /// an eighth of ``ageLimit``, whichever of the last two is smaller. Default 1 s.
        public var accessTimeGranularity: Duration = .seconds(1)
        /// Queued bytes above which `setData` waits for the writer. Default 64 MiB.
        public var maxPendingBytes: Int = 64 << 20
        /// How long opening the store waits while another process has it to itself (a
        /// compaction or repair copying it, which can take minutes on a large store) before
        /// throwing ``CacheError/storeInUse(path:operation:)``. It bounds as well the wait for
        /// another thread of this process that is opening the same store (and may be waiting for
        /// longer). Default 30 s.
        public var openTimeout: Duration = .seconds(30)
        /// The time source for expiry and access order.
        public var clock: CacheClock = .system
        /// Opens an existing store only to read it (`cache-dump`): LMDB's `MDB_RDONLY`, nothing
        /// created, no trimming, a damaged store reported rather than set aside. Writes fail.
        package var readOnly = false

        /// A configuration with the given limits and defaults for everything else.
        public init(
            countLimit: Int? = nil, costLimit: Int? = nil, ageLimit: Duration? = nil,
            freeSpaceLimit: Int? = nil, autoTrimInterval: Duration = .seconds(60)
        ) {
            self.countLimit = countLimit
            self.costLimit = costLimit
            self.ageLimit = ageLimit
            self.freeSpaceLimit = freeSpaceLimit
            self.autoTrimInterval = autoTrimInterval
        }

        var limits: DiskLimits {
            DiskLimits(
                count: countLimit, cost: costLimit, lowWater: min(max(lowWaterMark, 0), 1), freeSpace: freeSpaceLimit,
                clock: clock)
        }

        var environmentOptions: Environment.Options {
            Environment.Options(
                initialMapSize: max(initialMapSize, 1 << 20),
                sync: durability.syncInterval == nil ? .everyCommit : .onRequest,
                setsAsideDamagedFile: !readOnly && damagedStore == .recreate,
                databases: DiskDatabases.names,
                readOnly: readOnly,
                openTimeout: openTimeout)
        }
    }
}
