import CSQLite
import Foundation

/// `SQLite`: the system's libsqlite3 used as YYKVStorage (YYDiskCache's store) uses it for values
/// below its inline threshold: one `manifest` table keyed by the key, holding the value inline
/// with its size and modification and access times; WAL journal, `synchronous=NORMAL`;
/// prepared statements kept and reset; every read also updates the row's access time (YYCache's
/// LRU trimming reads it). Each statement commits on its own (autocommit), as YYKVStorage's do.
/// With `synchronous=NORMAL` WAL commits are not synced; `finishWrites()` checkpoints the WAL
/// (`wal_checkpoint(PASSIVE)`: it copies what no reader still needs, without waiting for readers)
/// and then syncs the WAL and the database file through SQLite's own handles, so the writes are
/// durable at the end of a run. Synchronous: `synchronous=FULL`, so each commit syncs the WAL.
final class SQLiteStore: DiskSystem {
    let name = "SQLite"
    let directory: String?
    let durability: WriteDurability
    private let synchronousMode: DiskDurability
    private var database: OpaquePointer?
    private var insert: OpaquePointer?
    private var select: OpaquePointer?
    private var touch: OpaquePointer?

    init(directory: String, durability: DiskDurability) throws {
        self.directory = directory
        synchronousMode = durability
        self.durability = durability == .synchronous ? .onReturn : .atEnd
        guard sqlite3_open("\(directory)/manifest.sqlite", &database) == SQLITE_OK else {
            throw SQLiteFailure(database, "sqlite3_open")
        }
        // A second connection (concurrentWriter()) waits for the write lock instead of failing.
        sqlite3_busy_timeout(database, 10_000)
        let synchronous = durability == .synchronous ? "FULL" : "NORMAL"
        try execute("PRAGMA journal_mode = WAL")
        try execute("PRAGMA synchronous = \(synchronous)")
        try execute(
            """
            CREATE TABLE IF NOT EXISTS manifest (key TEXT, filename TEXT, size INTEGER, inline_data BLOB,
                modification_time INTEGER, last_access_time INTEGER, extended_data BLOB, PRIMARY KEY(key))
            """)
        try execute("CREATE INDEX IF NOT EXISTS last_access_time_idx ON manifest(last_access_time)")
        insert = try prepare(
            """
            INSERT OR REPLACE INTO manifest (key, filename, size, inline_data, modification_time,
                last_access_time, extended_data) VALUES (?1, NULL, ?2, ?3, ?4, ?4, NULL)
            """)
        select = try prepare("SELECT inline_data FROM manifest WHERE key = ?1")
        touch = try prepare("UPDATE manifest SET last_access_time = ?1 WHERE key = ?2")
    }

    private func execute(_ sql: String) throws {
        guard sqlite3_exec(database, sql, nil, nil, nil) == SQLITE_OK else { throw SQLiteFailure(database, sql) }
    }

    private func prepare(_ sql: String) throws -> OpaquePointer? {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK else {
            throw SQLiteFailure(database, sql)
        }
        return statement
    }

    /// Binds `key` as the text parameter `index` of `statement` for the duration of `body`.
    private func withKey<T>(_ key: [UInt8], _ statement: OpaquePointer?, _ index: Int32, _ body: () throws -> T)
        rethrows -> T
    {
        try key.withUnsafeBufferPointer { bytes in
            try bytes.withMemoryRebound(to: CChar.self) { text in
                sqlite3_bind_text(statement, index, text.baseAddress, Int32(text.count), nil)
                return try body()
            }
        }
    }

    func get(_ key: [UInt8]) throws -> [UInt8]? {
        let value: [UInt8]? = try withKey(key, select, 1) {
            defer { sqlite3_reset(select) }
            switch sqlite3_step(select) {
            case SQLITE_ROW:
                let count = Int(sqlite3_column_bytes(select, 0))
                guard let blob = sqlite3_column_blob(select, 0) else { return [] }
                return [UInt8](UnsafeRawBufferPointer(start: blob, count: count))
            case SQLITE_DONE:
                return nil
            default:
                throw SQLiteFailure(database, "select")
            }
        }
        guard value != nil else { return nil }
        // As YYKVStorage does, a failed access-time update does not fail the read: with a
        // second connection writing (the read-while-writing workload), the update can find the
        // database locked even after the busy timeout. Anything but busy or locked is an error.
        let updated = withKey(key, touch, 2) { () -> Int32 in
            defer { sqlite3_reset(touch) }
            sqlite3_bind_int64(touch, 1, Int64(time(nil)))
            return sqlite3_step(touch)
        }
        guard updated == SQLITE_DONE || updated & 0xFF == SQLITE_BUSY || updated & 0xFF == SQLITE_LOCKED else {
            throw SQLiteFailure(database, "update")
        }
        return value
    }

    func set(_ value: [UInt8], forKey key: [UInt8]) throws {
        try withKey(key, insert, 1) {
            defer { sqlite3_reset(insert) }
            try value.withUnsafeBytes { bytes in
                sqlite3_bind_int(insert, 2, Int32(bytes.count))
                sqlite3_bind_blob(insert, 3, bytes.baseAddress, Int32(bytes.count), nil)
                sqlite3_bind_int64(insert, 4, Int64(time(nil)))
                guard sqlite3_step(insert) == SQLITE_DONE else { throw SQLiteFailure(database, "insert") }
            }
        }
    }

    func finishWrites() throws {
        if durability == .atEnd { try checkpointAndSync() }
    }

    /// Untimed: the access-time updates of a read run leave WAL frames that a later auto-checkpoint
    /// would sync in the next system's run; checkpoint and sync them now.
    func drain() throws { try checkpointAndSync() }

    /// A passive checkpoint, then a sync of the WAL and the database. Through SQLite's own file
    /// handles: opening and closing the files here would drop the POSIX locks this process holds
    /// on them, and another connection closing would then think it the last one and reset the
    /// WAL under us.
    private func checkpointAndSync() throws {
        try execute("PRAGMA wal_checkpoint(PASSIVE)")
        try sync(SQLITE_FCNTL_JOURNAL_POINTER, "the WAL")
        try sync(SQLITE_FCNTL_FILE_POINTER, "the database")
    }

    /// Syncs the file `operation` (a `SQLITE_FCNTL_*_POINTER`) names, if SQLite has it open.
    private func sync(_ operation: Int32, _ name: String) throws {
        var file: UnsafeMutablePointer<sqlite3_file>?
        guard sqlite3_file_control(database, "main", operation, &file) == SQLITE_OK else {
            throw SQLiteFailure(database, "file_control(\(name))")
        }
        guard let file, let methods = file.pointee.pMethods, let xSync = methods.pointee.xSync else { return }
        guard xSync(file, SQLITE_SYNC_NORMAL) == SQLITE_OK else { throw SQLiteFailure(database, "sync \(name)") }
    }

    /// A second connection to the same database file (WAL lets it write while this one reads).
    func concurrentWriter() throws -> any DiskSystem {
        guard let directory else { throw SQLiteFailure(nil, "no directory") }
        return try SQLiteStore(directory: directory, durability: synchronousMode)
    }

    func close() {
        for statement in [insert, select, touch] { sqlite3_finalize(statement) }
        insert = nil
        select = nil
        touch = nil
        sqlite3_close(database)
        database = nil
    }
}

/// A failed SQLite call, with SQLite's message.
struct SQLiteFailure: Error, CustomStringConvertible {
    let description: String

    init(_ database: OpaquePointer?, _ operation: String) {
        description = "\(operation): \(database.map { String(cString: sqlite3_errmsg($0)) } ?? "no database")"
    }
}
