import CRocksDB
import Foundation

/// `RocksDB`: the system's librocksdb (Debian's librocksdb-dev, 7.8 on bookworm) through its C API,
/// configured as a cache user would configure it: `create_if_missing`; an LRU block cache of
/// 256 MiB (set through the block-based table options) so the suite's largest data set (50,000 ×
/// 4 KB, about 200 MB) stays in memory as it stays in the page cache for the other systems; a
/// full Bloom filter of 10 bits per key (RocksDB's recommended setting for point lookups);
/// `increase_parallelism(2)` for the 2 cores here; the write-ahead log on; compression left at
/// RocksDB's default for the build (``compression`` reads it back from the options: Snappy in
/// Debian's, as the `Options.compression` line of the LOG it writes in its directory also says).
/// Compression applies to the table files flushes and compactions write; the WAL and the memtable
/// hold values as they are.
///
/// Standard mode: each put is written to the WAL without sync (`sync=false`), and
/// ``finishWrites()`` syncs the WAL (`rocksdb_flush_wal(db, 1)`), so the writes are durable at the
/// end of a run. Per batch (the `RocksDB (per batch)` row): the same, and every 1,000th put is
/// written with `sync=1`, which syncs the WAL and every put before it, so writes are durable a
/// batch at a time as LMDBCache's default batches and LMDB-C's per-batch commits make them.
/// Synchronous: write options with `sync=1`, so each put returns once its WAL record is synced.
///
/// Reads copy the value out of a pinned slice into a new array. Every call's error string becomes
/// a thrown ``RocksDBFailure`` with RocksDB's text. Flushes of the memtable and compactions run on
/// RocksDB's background threads; ``drain()`` waits for them, so none runs in the next system's
/// timing. RocksDB locks its directory: one process at a time.
final class RocksDBStore: DiskSystem {
    let name = "RocksDB"
    let directory: String?
    let durability: WriteDurability
    var variant: String? { durability == .perBatch ? "per batch" : nil }
    /// The compression in effect, read back from the options after they are set.
    private(set) var compression = "unknown"
    private var database: OpaquePointer?
    private var options: OpaquePointer?
    private var blockCache: OpaquePointer?
    private var readOptions: OpaquePointer?
    private var writeOptions: OpaquePointer?
    /// Per batch: the options of every ``putsPerSync``th put (`sync=1`), and the puts since the
    /// last synced one (one writer thread at a time, as the suite drives it).
    private var syncingWriteOptions: OpaquePointer?
    private var putsSinceSync = 0
    /// Per batch: puts between WAL syncs, LMDB-C's puts per transaction.
    static let putsPerSync = 1_000

    /// The block cache's capacity: more than the suite's largest data set (about 200 MB).
    static let blockCacheBytes = 256 << 20
    /// Bloom filter bits per key: about 1% false positives.
    static let bloomBitsPerKey = 10.0
    /// Background threads (flushes and compactions): the cores of the machines the suite runs on.
    static let backgroundThreads: Int32 = 2
    /// How long ``drain()`` waits for background work before it gives up.
    static let drainLimit = Duration.seconds(60)
    /// The integer properties that are all 0 once RocksDB has no flush or compaction running or
    /// pending.
    static let backgroundWorkProperties = [
        "rocksdb.num-running-flushes", "rocksdb.num-running-compactions", "rocksdb.mem-table-flush-pending",
        "rocksdb.compaction-pending",
    ]

    init(directory: String, durability: DiskDurability, perBatch: Bool = false) throws {
        self.directory = directory
        self.durability = durability == .synchronous ? .onReturn : perBatch ? .perBatch : .atEnd
        do {
            // Kept as they are created, so that close() frees whatever was created if a later
            // step throws.
            options = rocksdb_options_create()
            blockCache = rocksdb_cache_create_lru(Self.blockCacheBytes)
            readOptions = rocksdb_readoptions_create()
            writeOptions = rocksdb_writeoptions_create()
            syncingWriteOptions = rocksdb_writeoptions_create()
            guard let options, let blockCache, let writeOptions, let syncingWriteOptions, readOptions != nil else {
                throw RocksDBFailure("creating the options: out of memory")
            }
            rocksdb_options_set_create_if_missing(options, 1)
            rocksdb_options_increase_parallelism(options, Self.backgroundThreads)
            guard let table = rocksdb_block_based_options_create() else {
                throw RocksDBFailure("rocksdb_block_based_options_create: out of memory")
            }
            // The table options hold a reference to the cache (this store still frees its own
            // handle) and take ownership of the filter policy; the table factory copies them.
            rocksdb_block_based_options_set_block_cache(table, blockCache)
            if let bloom = rocksdb_filterpolicy_create_bloom_full(Self.bloomBitsPerKey) {
                rocksdb_block_based_options_set_filter_policy(table, bloom)
            } else {
                rocksdb_block_based_options_destroy(table)
                throw RocksDBFailure("rocksdb_filterpolicy_create_bloom_full: out of memory")
            }
            rocksdb_options_set_block_based_table_factory(options, table)
            rocksdb_block_based_options_destroy(table)
            rocksdb_writeoptions_set_sync(writeOptions, durability == .synchronous ? 1 : 0)
            rocksdb_writeoptions_set_sync(syncingWriteOptions, 1)
            compression = "\(Self.compressionName(rocksdb_options_get_compression(options))) (RocksDB's default)"
            database = try Self.check("rocksdb_open \(directory)") { rocksdb_open(options, directory, $0) }
            guard database != nil else { throw RocksDBFailure("rocksdb_open \(directory): no database") }
        } catch {
            close()
            throw error
        }
    }

    /// The name of one of the C API's compression constants.
    private static func compressionName(_ type: Int32) -> String {
        switch Int(type) {
        case rocksdb_no_compression: "none"
        case rocksdb_snappy_compression: "snappy"
        case rocksdb_zlib_compression: "zlib"
        case rocksdb_bz2_compression: "bzip2"
        case rocksdb_lz4_compression: "lz4"
        case rocksdb_lz4hc_compression: "lz4hc"
        case rocksdb_xpress_compression: "xpress"
        case rocksdb_zstd_compression: "zstd"
        default: "type \(type)"
        }
    }

    /// Runs `body` with an error pointer for a RocksDB call, and throws the error string it set, if
    /// any (freed with `rocksdb_free`).
    private static func check<T>(
        _ operation: String, _ body: (UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> T
    ) throws -> T {
        var error: UnsafeMutablePointer<CChar>?
        let result = body(&error)
        if let error {
            defer { rocksdb_free(error) }
            throw RocksDBFailure("\(operation): \(String(cString: error))")
        }
        return result
    }

    /// `bytes` as the `const char *` and length the C API takes, for the duration of `body`.
    private func withChars<T>(_ bytes: [UInt8], _ body: (UnsafePointer<CChar>?, Int) throws -> T) rethrows -> T {
        try bytes.withUnsafeBufferPointer { buffer in
            try buffer.withMemoryRebound(to: CChar.self) { try body($0.baseAddress, $0.count) }
        }
    }

    private func handle() throws -> OpaquePointer {
        guard let database else { throw RocksDBFailure("the store is closed") }
        return database
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? {
        let database = try handle()
        let pinned = try withChars(key) { key, keyLength in
            try Self.check("rocksdb_get_pinned") {
                rocksdb_get_pinned(database, readOptions, key, keyLength, $0)
            }
        }
        // Absent: no slice and no error.
        guard let pinned else { return nil }
        defer { rocksdb_pinnableslice_destroy(pinned) }
        var length = 0
        let data = rocksdb_pinnableslice_value(pinned, &length)
        guard length > 0 else {
            guard length == 0 else { throw RocksDBFailure("rocksdb_pinnableslice_value: length \(length)") }
            return []
        }
        guard let data else { throw RocksDBFailure("rocksdb_pinnableslice_value: no data for \(length) bytes") }
        return [UInt8](UnsafeRawBufferPointer(start: data, count: length))
    }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        let database = try handle()
        var writeOptions = writeOptions
        if durability == .perBatch {
            putsSinceSync += 1
            if putsSinceSync >= Self.putsPerSync {
                writeOptions = syncingWriteOptions
                putsSinceSync = 0
            }
        }
        try withChars(key) { key, keyLength in
            try withChars(value) { value, valueLength in
                try Self.check("rocksdb_put") {
                    rocksdb_put(database, writeOptions, key, keyLength, value, valueLength, $0)
                }
            }
        }
    }

    /// Standard mode and per batch: syncs the WAL, which holds every write not yet in a synced
    /// table file. Synchronous: nothing to do, each put synced its WAL record.
    func finishWrites() throws {
        let database = try handle()
        guard durability != .onReturn else { return }
        try Self.check("rocksdb_flush_wal") { rocksdb_flush_wal(database, 1, $0) }
        putsSinceSync = 0
    }

    /// Polls RocksDB's background-work properties every millisecond until none is running or
    /// pending (memtable flushes, compactions), for at most ``drainLimit``.
    func drain() throws {
        let database = try handle()
        let clock = ContinuousClock()
        let deadline = clock.now + Self.drainLimit
        while true {
            var busy: [String] = []
            for property in Self.backgroundWorkProperties {
                var value: UInt64 = 0
                guard rocksdb_property_int(database, property, &value) == 0 else {
                    throw RocksDBFailure("rocksdb_property_int \(property): not available")
                }
                if value != 0 { busy.append("\(property) \(value)") }
            }
            if busy.isEmpty { return }
            guard clock.now < deadline else {
                throw RocksDBFailure("drain: still busy after \(Self.drainLimit): \(busy.joined(separator: ", "))")
            }
            usleep(1_000)
        }
    }

    /// Flushes the memtable to a table file and waits (so a reopen replays no WAL into memory,
    /// and a cold read reads files), closes the database, then frees the options, the block
    /// cache and the read and write options; a second call does nothing.
    func close() {
        if let database {
            let flush = rocksdb_flushoptions_create()
            rocksdb_flushoptions_set_wait(flush, 1)
            var error: UnsafeMutablePointer<CChar>?
            rocksdb_flush(database, flush, &error)
            if let error { rocksdb_free(error) }  // best effort: the WAL still holds the writes
            rocksdb_flushoptions_destroy(flush)
            rocksdb_close(database)
        }
        database = nil
        if let options { rocksdb_options_destroy(options) }
        options = nil
        if let blockCache { rocksdb_cache_destroy(blockCache) }
        blockCache = nil
        if let readOptions { rocksdb_readoptions_destroy(readOptions) }
        readOptions = nil
        if let writeOptions { rocksdb_writeoptions_destroy(writeOptions) }
        writeOptions = nil
        if let syncingWriteOptions { rocksdb_writeoptions_destroy(syncingWriteOptions) }
        syncingWriteOptions = nil
    }

    /// The same handle: a RocksDB database handle is thread-safe (concurrent gets and puts on one
    /// `rocksdb_t` need no external locking), and the read and write options are only read.
    func concurrentWriter() throws -> any DiskSystem { self }
}

/// A failed RocksDB call, with RocksDB's message.
struct RocksDBFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
