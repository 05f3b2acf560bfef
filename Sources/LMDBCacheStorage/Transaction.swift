import CLMDB

/// A named LMDB database (a B-tree) inside an environment.
@usableFromInline package struct Database: Sendable, Hashable {
    @usableFromInline package let handle: MDB_dbi
}

/// Raised inside a write transaction when the map is full; ``Environment/write(_:)`` catches it,
/// grows the map and replays the transaction. Code above Storage never sees it.
struct MapFull: Error {}

/// Operations common to read and write transactions.
///
/// Buffers returned by these calls point into LMDB's memory map: they are valid only until the
/// transaction ends or (in a write transaction) the next change, and must never escape the closure
/// that received the transaction.
@usableFromInline package protocol TransactionReading {
    var pointer: OpaquePointer { get }
    var path: String { get }
}

// Inlinable (and the protocol and its conforming types @usableFromInline, Repository.md): the disk
// tier's reads call these for every lookup, and across the module boundary a protocol extension's
// method would otherwise run unspecialized.
extension TransactionReading {
    /// The value stored under `key`, or nil.
    @inlinable
    package func get(_ database: Database, _ key: [UInt8]) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { try get(database, rawKey: $0) }
    }

    /// The value stored under the key in `key`'s bytes, or nil: ``get(_:_:)`` for a key that is
    /// not an array of its own (a slice of a buffer LMDB lent).
    @inlinable
    package func get(_ database: Database, rawKey key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer? {
        var k = lmdbcache_val(key.baseAddress, key.count)
        var v = MDB_val()
        let code = mdb_get(pointer, database.handle, &k, &v)
        if code == MDB_NOTFOUND { return nil }
        try LMDBStatus.check(code, "mdb_get", path: path)
        return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
    }

    /// Calls `body` with each entry in key order, starting at the first key not less than `start`,
    /// until it returns false.
    ///
    /// - Parameter bytewiseOrdered: the database compares keys as bytes (every database of the
    ///   store; not LMDB's free list): a key that does not follow the one before throws
    ///   ``StorageError/damagedStore(path:reason:)``, so a walk over damaged pages ends.
    @inlinable
    package func forEach(
        _ database: Database, from start: [UInt8]? = nil, bytewiseOrdered: Bool = true,
        _ body: (UnsafeRawBufferPointer, UnsafeRawBufferPointer) throws -> Bool
    ) throws {
        var cursor: OpaquePointer?
        try LMDBStatus.check(mdb_cursor_open(pointer, database.handle, &cursor), "mdb_cursor_open", path: path)
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        var code: Int32
        if let start {
            code = start.withUnsafeBytes { bytes in
                k = lmdbcache_val(bytes.baseAddress, bytes.count)
                return mdb_cursor_get(cursor, &k, &v, MDB_SET_RANGE)
            }
        } else {
            code = mdb_cursor_get(cursor, &k, &v, MDB_FIRST)
        }
        // LMDB returns keys in increasing order; on damaged pages a cursor can go back or cycle
        // (a walk that never ends), so each key must follow the one before (or the start).
        var previous: [UInt8] = []
        var isFirst = true
        while code == MDB_SUCCESS {
            // A key longer than LMDB allows (511 bytes) comes from a damaged page: its size would
            // send a read past the page.
            guard k.mv_size <= 511 else {
                throw StorageError.damagedStore(path: path, reason: "a key longer than LMDB allows: its page is damaged")
            }
            let key = UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size)
            let value = UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size)
            let inOrder =
                !bytewiseOrdered || isFirst
                ? start.map { !key.lexicographicallyPrecedes($0) } ?? true
                : previous.lexicographicallyPrecedes(key)
            guard inOrder else {
                throw StorageError.damagedStore(
                    path: path, reason: "a database's keys are out of order: its pages are damaged")
            }
            if try !body(key, value) { return }
            previous.removeAll(keepingCapacity: true)
            previous.append(contentsOf: key)
            isFirst = false
            code = mdb_cursor_get(cursor, &k, &v, MDB_NEXT)
        }
        if code != MDB_NOTFOUND { try LMDBStatus.check(code, "mdb_cursor_get", path: path) }
    }

    /// The first key in `database` (a copy), or nil when it is empty.
    @inlinable
    package func firstKey(_ database: Database) throws -> [UInt8]? {
        var first: [UInt8]?
        try forEach(database) { key, _ in
            first = Array(key)
            return false
        }
        return first
    }

    /// The last key in `database` (a copy), or nil when it is empty.
    @inlinable
    package func lastKey(_ database: Database) throws -> [UInt8]? {
        var cursor: OpaquePointer?
        try LMDBStatus.check(mdb_cursor_open(pointer, database.handle, &cursor), "mdb_cursor_open", path: path)
        defer { mdb_cursor_close(cursor) }
        var k = MDB_val()
        var v = MDB_val()
        let code = mdb_cursor_get(cursor, &k, &v, MDB_LAST)
        if code == MDB_NOTFOUND { return nil }
        try LMDBStatus.check(code, "mdb_cursor_get(last)", path: path)
        return Array(UnsafeRawBufferPointer(start: k.mv_data, count: k.mv_size))
    }

    /// Number of entries in `database`.
    @inlinable
    package func count(_ database: Database) throws -> Int {
        var stat = MDB_stat()
        try LMDBStatus.check(mdb_stat(pointer, database.handle, &stat), "mdb_stat", path: path)
        return stat.ms_entries
    }
}

/// A read-only snapshot. Obtained from ``Environment/read(_:)``; never outlives that call.
@usableFromInline package struct ReadTransaction: TransactionReading {
    @usableFromInline package let pointer: OpaquePointer
    @usableFromInline package let path: String

    @usableFromInline package init(pointer: OpaquePointer, path: String) {
        self.pointer = pointer
        self.path = path
    }
}

/// A write transaction on the writer thread. Obtained from ``Environment/write(_:)``.
@usableFromInline package struct WriteTransaction: TransactionReading {
    @usableFromInline package let pointer: OpaquePointer
    @usableFromInline package let path: String
    /// Set by every call that changed the snapshot. LMDB commits a transaction that changed
    /// nothing without syncing anything, so a commit meant to be durable must know.
    package let changes = ChangeMark()

    package final class ChangeMark {
        package fileprivate(set) var changed = false
    }

    init(pointer: OpaquePointer, path: String) {
        self.pointer = pointer
        self.path = path
    }

    /// Stores `value` under `key`, replacing any value there.
    package func put(_ database: Database, _ key: [UInt8], _ value: UnsafeRawBufferPointer) throws {
        try key.withUnsafeBytes { try put(database, rawKey: $0, value) }
    }

    /// ``put(_:_:_:)-(_,[UInt8],_)`` with the key's bytes in place (no array).
    package func put(_ database: Database, rawKey key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) throws {
        var k = lmdbcache_val(key.baseAddress, key.count)
        var v = lmdbcache_val(value.baseAddress, value.count)
        try check(mdb_put(pointer, database.handle, &k, &v, 0), "mdb_put")
        changes.changed = true
    }

    /// ``put(_:rawKey:_:)`` for a key expected to sort after every key of `database` (a log's
    /// next sequence number): LMDB goes straight to the last page and, when that is full, leaves
    /// it full instead of splitting it in half. A key that does not sort last is put as usual.
    package func append(_ database: Database, rawKey key: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer)
        throws
    {
        var k = lmdbcache_val(key.baseAddress, key.count)
        var v = lmdbcache_val(value.baseAddress, value.count)
        let code = mdb_put(pointer, database.handle, &k, &v, UInt32(MDB_APPEND))
        if code == MDB_KEYEXIST { return try put(database, rawKey: key, value) }
        try check(code, "mdb_put")
        changes.changed = true
    }

    package func put(_ database: Database, _ key: [UInt8], _ value: [UInt8]) throws {
        try value.withUnsafeBytes { try put(database, key, $0) }
    }

    /// Stores `value` under `key` unless the key is present; false (and nothing changed) if it is.
    /// One search instead of a lookup followed by a put.
    package func putIfAbsent(_ database: Database, _ key: [UInt8], _ value: UnsafeRawBufferPointer) throws -> Bool {
        try putUnlessPresent(database, key, value) == nil
    }

    /// Stores `value` under `key` unless the key is present, and then returns the value stored
    /// there (nothing changed; the bytes are valid until this transaction's next change, like
    /// ``get(_:_:)``'s); nil when it stored `value`. One search either way.
    package func putUnlessPresent(
        _ database: Database, _ key: [UInt8], _ value: UnsafeRawBufferPointer
    ) throws -> UnsafeRawBufferPointer? {
        try key.withUnsafeBytes { keyBytes in
            var k = lmdbcache_val(keyBytes.baseAddress, keyBytes.count)
            var v = lmdbcache_val(value.baseAddress, value.count)
            // With MDB_NOOVERWRITE, LMDB points the data at the stored item when the key is there.
            let code = mdb_put(pointer, database.handle, &k, &v, UInt32(MDB_NOOVERWRITE))
            if code == MDB_KEYEXIST { return UnsafeRawBufferPointer(start: v.mv_data, count: v.mv_size) }
            try check(code, "mdb_put")
            changes.changed = true
            return nil
        }
    }

    /// Removes `key`; returns false when it was not there.
    @discardableResult
    package func delete(_ database: Database, _ key: [UInt8]) throws -> Bool {
        try key.withUnsafeBytes { try delete(database, rawKey: $0) }
    }

    /// ``delete(_:_:)`` with the key's bytes in place (no array).
    @discardableResult
    package func delete(_ database: Database, rawKey key: UnsafeRawBufferPointer) throws -> Bool {
        var k = lmdbcache_val(key.baseAddress, key.count)
        let code = mdb_del(pointer, database.handle, &k, nil)
        if code == MDB_NOTFOUND { return false }
        try check(code, "mdb_del")
        changes.changed = true
        return true
    }

    /// Removes every entry of `database`.
    package func empty(_ database: Database) throws {
        try check(mdb_drop(pointer, database.handle, 0), "mdb_drop")
        changes.changed = true
    }

    private func check(_ code: Int32, _ operation: String) throws {
        if code == MDB_MAP_FULL { throw MapFull() }
        try LMDBStatus.check(code, operation, path: path)
    }
}
