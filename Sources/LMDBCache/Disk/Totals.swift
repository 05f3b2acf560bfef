import LMDBCacheStorage

/// Entry count and bytes of a store, as kept in the `info` database.
package struct Totals: Equatable, Sendable {
    /// Entries.
    package var count: Int
    /// Bytes: each entry's stored key and record.
    package var bytes: Int

    static let countKey = Array("count".utf8)
    static let bytesKey = Array("bytes".utf8)
    static let formatKey = Array("format".utf8)
    /// Counts emergency trims; writing it commits a transaction that changes nothing else.
    static let emergencyTrimsKey = Array("emergencyTrims".utf8)

    init(count: Int = 0, bytes: Int = 0) {
        self.count = count
        self.bytes = bytes
    }

    /// The totals stored in `info`. A stored value above `Int.max` cannot be a real count (the
    /// file was damaged): it reads as 0, so the writer goes on (its sums stay far from overflow)
    /// rather than trapping on every batch; the totals are then low until
    /// `cache-dump verify --repair` recounts them.
    init(_ txn: some TransactionReading, _ info: Database) throws {
        count = Self.plausible(try Self.load(txn, info, Self.countKey))
        bytes = Self.plausible(try Self.load(txn, info, Self.bytesKey))
    }

    /// `stored` as an `Int`, or 0 when it does not fit (damage, not a count).
    static func plausible(_ stored: UInt64) -> Int {
        Int(exactly: stored) ?? 0
    }

    func save(_ txn: WriteTransaction, _ info: Database) throws {
        try Self.store(txn, info, Self.countKey, UInt64(max(0, count)))
        try Self.store(txn, info, Self.bytesKey, UInt64(max(0, bytes)))
    }

    static func load(_ txn: some TransactionReading, _ info: Database, _ key: [UInt8]) throws -> UInt64 {
        guard let value = try txn.get(info, key), value.count == 8 else { return 0 }
        return value.loadLE(UInt64.self, at: 0)
    }

    static func store(_ txn: WriteTransaction, _ info: Database, _ key: [UInt8], _ value: UInt64) throws {
        try withUnsafeBytes(of: value.littleEndian) { try txn.put(info, key, $0) }
    }

    /// What an entry adds to `bytes`: its stored key and its record.
    static func cost(keyLength: Int, recordLength: Int) -> Int { keyLength + recordLength }
}
