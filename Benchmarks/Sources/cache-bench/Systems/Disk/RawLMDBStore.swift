import BenchmarkData
import RawLMDB

/// `LMDB-C`: the same keys and values through plain LMDB C calls, with no record, checksum,
/// index or access times: the limit a store on LMDB can reach. Reads reuse one read transaction
/// and copy the value into a new array. Writes go 1,000 puts to a transaction, in one of three
/// modes: `nosync` (`MDB_NOSYNC`, one `mdb_env_sync` at the end of a run), `per batch`
/// (`MDB_NOMETASYNC`: each commit `fdatasync`s its data pages, making the batch before it durable,
/// as LMDBCache's default batches do; `mdb_env_sync` at the end of a run), or
/// synchronous (one put a transaction, a full sync on every commit).
///
/// With `compressed`, values of 512 bytes and up are deflated at zlib level 1 and kept so when
/// smaller (LMDBCache's defaults), behind a one-byte tag; the `LMDB-C + zlib` row.
///
/// A read looks in the write transaction still open, if any, so it sees the writes before it.
/// After ``concurrentWriter()``, one thread may read while one other writes through the same
/// instance: reads then use only the read transaction (and inflater), writes only the write
/// transaction (and deflater), and `MDB_NOTLS` lets each thread hold its own.
final class RawLMDBStore: DiskSystem {
    /// How commits reach the disk.
    enum Mode {
        case nosync, perBatch, synchronous
    }

    let name: String
    let directory: String?
    let durability: WriteDurability
    let variant: String?
    private let store: RawLMDB
    private let putsPerTransaction: Int
    private let syncsOnFinish: Bool
    private let deflater: RawDeflater?
    private let inflater: RawInflater?

    /// Values at least this long are deflated when `compressed` (LMDBCache's default threshold).
    static let compressionThreshold = 512

    init(directory: String, mode: Mode, compressed: Bool = false) throws {
        name = compressed ? "LMDB-C + zlib" : "LMDB-C"
        self.directory = directory
        // Per batch: a commit's meta page is synced by the next commit; the final sync makes the
        // last batch durable, as LMDBCache's flush() does.
        let flags: Int32
        (flags, putsPerTransaction, syncsOnFinish, durability, variant) =
            switch mode {
            case .nosync: (RawLMDB.batchedFlags, 1_000, true, .atEnd, "nosync")
            case .perBatch: (RawLMDB.perBatchFlags, 1_000, true, .perBatch, "per batch")
            case .synchronous: (RawLMDB.synchronousFlags, 1, false, .onReturn, nil)
            }
        store = try RawLMDB(directory: directory, flags: flags)
        deflater = compressed ? try RawDeflater(level: 1) : nil
        inflater = compressed ? try RawInflater() : nil
    }

    var compression: String { deflater == nil ? "none" : "DEFLATE 1 (zlib), 512 B and up" }

    func get(_ key: [UInt8]) throws -> [UInt8]? {
        guard let inflater else { return try store.withValue(forKey: key, Array.init) }
        return try store.withValue(forKey: key) { stored -> [UInt8] in
            guard let tag = stored.first else { throw BenchError(description: "empty stored value") }
            let body = UnsafeRawBufferPointer(rebasing: stored.dropFirst())
            if tag == 0 { return Array(body) }
            guard let value = DeflatedValue.decode(body, with: inflater) else {
                throw BenchError(description: "a stored value does not inflate")
            }
            return value
        }
    }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        try store.put(key, try stored(value), perTransaction: putsPerTransaction)
    }

    /// `value` as stored: as it is, or behind a tag byte (0: as it is, 1: deflated) when compressing.
    private func stored(_ value: [UInt8]) throws -> [UInt8] {
        guard let deflater else { return value }
        if value.count >= Self.compressionThreshold {
            let deflated = try DeflatedValue.encode(value, with: deflater)
            if deflated.count < value.count { return [1] + deflated }
        }
        return [0] + value
    }

    func finishWrites() throws {
        try store.commit()
        if syncsOnFinish { try store.sync() }
    }

    /// Nothing is deferred; the other thread of ``concurrentWriter()`` has stopped by now (the
    /// suite drains after every run), so reads look in the write transaction again.
    func drain() throws { store.readsOwnWrites = true }

    func close() { store.close() }

    /// This instance, its reads no longer looking in the write transaction: each thread then
    /// uses only its own (see the type's summary).
    func concurrentWriter() throws -> any DiskSystem {
        store.readsOwnWrites = false
        return self
    }
}
