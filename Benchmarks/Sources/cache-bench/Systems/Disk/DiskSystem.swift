/// A persistent key-value store the disk suite can drive. One file per peer in this folder.
///
/// Each instance owns one store (a directory, or a Redis database) opened for one value size.
/// The measured loops call only ``get(_:)``, ``set(_:forKey:)``, ``finishWrites()`` and, for a
/// system that pipelines requests, ``get(many:)`` and ``set(many:)``.
protocol DiskSystem: AnyObject {
    /// The name in the report, exactly as Performance.md (LMDBCache.docc) lists it.
    var name: String { get }
    /// How it is driven, when that is not the default (e.g. `pipelined 100`).
    var variant: String? { get }
    /// Requests sent at once: 1 unless the system pipelines.
    var pipelineDepth: Int { get }
    /// When a write it accepted is on stable storage, as its configuration here makes it: the
    /// report's `durable` column.
    var durability: WriteDurability { get }
    /// How it compresses values on disk, for the report (`none`, `zlib 1, 512 B and up`, ...).
    var compression: String { get }
    /// The directory holding all its files (for bytes on disk, and for dropping its pages from
    /// the page cache before cold reads); nil when it keeps nothing on disk (Redis here).
    var directory: String? { get }

    /// The value stored under `key`, as a new array the caller owns; nil when absent.
    func get(_ key: [UInt8]) throws -> [UInt8]?
    /// Stores `value` under `key`, replacing any value.
    func set(_ value: [UInt8], forKey key: [UInt8]) throws
    /// Makes every write so far reach the store (flush, commit), as a caller that needs them
    /// there would; the set workload's time includes it.
    func finishWrites() throws
    /// Waits, untimed, until work the system deferred from earlier calls is done (LMDBCache's
    /// queued access times, RocksDB's flushes and compactions), so none of it runs in the next
    /// system's timing. Called after every timed run.
    func drain() throws
    /// Closes the store; nothing is called after.
    func close()
    /// A handle to the same store that one other thread may write through while this handle
    /// reads on its own thread (the store itself, when it is thread-safe; a second connection
    /// otherwise).
    func concurrentWriter() throws -> any DiskSystem

    /// The total bytes of the values found for `keys`, sent as one pipeline.
    func get(many keys: ArraySlice<[UInt8]>) throws -> (found: Int, bytes: Int)
    /// Stores each pair, sent as one pipeline.
    func set(many pairs: [(key: [UInt8], value: [UInt8])]) throws
}

extension DiskSystem {
    var variant: String? { nil }
    var pipelineDepth: Int { 1 }
    var compression: String { "none" }
    func drain() throws {}

    func get(many keys: ArraySlice<[UInt8]>) throws -> (found: Int, bytes: Int) {
        var found = 0
        var bytes = 0
        for key in keys {
            if let value = try get(key) {
                found += 1
                bytes += value.count
            }
        }
        return (found, bytes)
    }

    func set(many pairs: [(key: [UInt8], value: [UInt8])]) throws {
        for pair in pairs { try set(pair.value, forKey: pair.key) }
    }
}

/// When a write a system accepted is on stable storage: the report's `durable` column.
enum WriteDurability: String, Codable, Sendable {
    /// Before the call returns.
    case onReturn = "on return"
    /// When the batch it was committed in is synced, shortly after it returns (a batch: up to
    /// 1,000 writes, or whatever was queued when the writer got to it).
    case perBatch = "per batch"
    /// Only when the run's final `finishWrites()` syncs (a checkpoint, a flush of the log).
    case atEnd = "at the end"
    /// Not in this configuration (no sync at all, or no persistence).
    case never
}

/// How writes reach the disk in a disk-suite store.
enum DiskDurability: Sendable {
    /// Each system's usual configuration (LMDBCache's default batching, SQLite's WAL with
    /// synchronous=NORMAL, LMDB-C batched without sync, ...).
    case standard
    /// A write returns once it is on stable storage.
    case synchronous
}
