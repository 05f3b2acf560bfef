import RawLMDB

/// `LMDB-C`: the same keys and values through plain LMDB C calls, stored as they are (no record,
/// checksum, index or compression), the limit a store on LMDB can reach. Reads reuse one read
/// transaction and copy the value into a new array; writes are 1,000 puts a transaction with
/// `MDB_NOSYNC` and one `mdb_env_sync` at the end, or, synchronous, one put a transaction with a
/// full sync on every commit.
final class RawLMDBStore: DiskSystem {
    let name = "LMDB-C"
    private let store: RawLMDB
    private let putsPerTransaction: Int
    private let syncsOnFinish: Bool

    init(directory: String, durability: DiskDurability) throws {
        switch durability {
        case .standard:
            store = try RawLMDB(directory: directory, flags: RawLMDB.batchedFlags)
            putsPerTransaction = 1_000
            syncsOnFinish = true
        case .synchronous:
            store = try RawLMDB(directory: directory, flags: RawLMDB.synchronousFlags)
            putsPerTransaction = 1
            syncsOnFinish = false
        }
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? { try store.withValue(forKey: key, Array.init) }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        try store.put(key, value, perTransaction: putsPerTransaction)
    }

    func finishWrites() throws {
        try store.commit()
        if syncsOnFinish { try store.sync() }
    }

    func close() { store.close() }
}
