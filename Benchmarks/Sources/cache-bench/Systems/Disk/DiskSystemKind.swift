/// One peer of the disk suite as a row of its tables: how to open a store of it in a directory,
/// and which workloads it takes part in.
struct DiskSystemKind: Sendable {
    /// The row's label: the system's name with its variant, e.g. `LMDB-C (nosync)`.
    var label: String
    /// In the synchronous-writes workload (a write durable on return).
    var synchronous = true
    /// Keeps its data in files under its directory that a reopen finds again: in the cold-read
    /// workload (closed, its pages dropped from the page cache, reopened).
    var reopens = true
    /// Can read on one thread while another writes: in the read-while-writing workload.
    var readsWhileWriting = true
    /// A second process can open its directory while this one has it open, both reading and
    /// writing: in the two-process workload, whose child finds its kind by label in ``local``
    /// (``timeTwoProcesses(kind:system:directory:keys:entries:payload:operations:seed:)``).
    /// False for variants left out to keep that workload short (`LMDBCache (periodic)`,
    /// `LMDB-C (nosync)`), for Redis (a server, not in ``local``) and for a store that locks its
    /// directory to one process (RocksDB).
    var sharesAcrossProcesses = true
    /// Takes synchronous writes from many threads at once, each through its own
    /// ``DiskSystem/concurrentWriter()`` handle: in the concurrent synchronous-writes rows. False
    /// for LMDB-C, whose one handle holds one write transaction.
    var writesFromManyThreads = true
    /// Opens (creating) a store in an existing directory, in the standard or synchronous mode.
    var open: @Sendable (_ directory: String, _ durability: DiskDurability) throws -> any DiskSystem

    /// The peers on local files, in their report order. Redis (a server) is added by the suite
    /// (``redis(server:)``).
    ///
    /// Across processes, LMDB has one writer at a time: LMDB-C's write transaction stays open for
    /// up to 1,000 puts (or until `finishWrites()`), and all that time the other process's next
    /// put waits in `mdb_txn_begin` (the two-process workload's notes in TwoProcesses.swift).
    static let local: [DiskSystemKind] = [
        .init(label: "LMDBCache") { directory, durability in
            try DiskCacheStore(directory: directory, mode: durability == .synchronous ? .synchronous : .batched)
        },
        .init(
            label: "LMDBCache (periodic)", synchronous: false, reopens: false, readsWhileWriting: false,
            sharesAcrossProcesses: false
        ) { directory, _ in
            try DiskCacheStore(directory: directory, mode: .periodic)
        },
        // The memory RocksDB's block cache has, as a memory tier of decoded values; durable as the
        // row above (a batch at a time). One process, as its memory tier is its own.
        .init(label: "LMDBCache (tiered)", synchronous: false, sharesAcrossProcesses: false) { directory, _ in
            try TieredCacheStore(directory: directory)
        },
        .init(label: "SQLite") { try SQLiteStore(directory: $0, durability: $1) },
        .init(label: "FilePerKey") { try FilePerKeyStore(directory: $0, durability: $1) },
        .init(
            label: "LMDB-C (nosync)", synchronous: false, reopens: false, readsWhileWriting: false,
            sharesAcrossProcesses: false
        ) { directory, _ in
            try RawLMDBStore(directory: directory, mode: .nosync)
        },
        .init(label: "LMDB-C (per batch)", writesFromManyThreads: false) { directory, durability in
            try RawLMDBStore(directory: directory, mode: durability == .synchronous ? .synchronous : .perBatch)
        },
        .init(label: "LMDB-C + zlib (per batch)", synchronous: false) { directory, _ in
            try RawLMDBStore(directory: directory, mode: .perBatch, compressed: true)
        },
        // Reopens (cold reads) and reads while another thread writes through the same handle; one
        // process at a time, as RocksDB locks its directory.
        .init(label: "RocksDB", sharesAcrossProcesses: false) { try RocksDBStore(directory: $0, durability: $1) },
        // LMDBCache's durability (a batch at a time) in the workloads with writes; its cold reads
        // and synchronous writes are the row above's.
        .init(label: "RocksDB (per batch)", synchronous: false, reopens: false, sharesAcrossProcesses: false) {
            directory, _ in
            try RocksDBStore(directory: directory, durability: .standard, perBatch: true)
        },
    ]

    /// The Redis peers on `server`, in their report order: loopback TCP one request at a time,
    /// the Unix socket one request at a time, the Unix socket pipelined 100. Each uses a database
    /// of its own (1, 2, 3). Labelled as the table prints them: `Redis (unix socket)`.
    static func redis(server: RedisServer) -> [DiskSystemKind] {
        let peers: [(transport: RedisTransport, depth: Int)] = [
            (.loopbackTCP, 1), (.unixSocket, 1), (.unixSocket, 100),
        ]
        return peers.enumerated().map { index, peer in
            let database = index + 1
            return DiskSystemKind(
                label: "Redis (\(RedisStore.variant(transport: peer.transport, pipelineDepth: peer.depth)))",
                synchronous: false, reopens: false, readsWhileWriting: false, sharesAcrossProcesses: false
            ) { _, _ in
                try RedisStore(server: server, database: database, transport: peer.transport, pipelineDepth: peer.depth)
            }
        }
    }
}
