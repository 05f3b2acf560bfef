import CLMDB
import Foundation
import Glibc
import Logging
import Synchronization

/// One open LMDB environment (a directory holding `data.mdb` and `lock.mdb`).
///
/// Owns the memory map and its growth, a pool of reusable read transactions, and the writer
/// thread. Environments are opened only by objects shared through ``DirectoryRegistry``, so a
/// directory is open at most once per process, as LMDB requires.
@usableFromInline package final class Environment: @unchecked Sendable {
    package struct Options: Sendable {
        package var initialMapSize: Int
        package var maxReaders: UInt32 = 1_024
        /// How commits reach the disk; ``Environment/syncFlags(_:)`` says in LMDB's flags.
        package var sync: SyncMode
        /// On open, a damaged data file is set aside (`data.mdb.damaged-<time>`, keeping the
        /// newest 3) and the store starts empty; otherwise the open throws
        /// ``StorageError/damagedStore(path:reason:)``.
        package var setsAsideDamagedFile: Bool
        package var databases: [String]
        /// Opens with `MDB_RDONLY`: no write transaction, no file created, the databases must
        /// exist. For inspecting a store (`cache-dump`) without changing it.
        package var readOnly = false
        /// How long an open waits while another process has the store to itself.
        package var openTimeout: Duration = .seconds(30)

        package init(
            initialMapSize: Int, sync: SyncMode, setsAsideDamagedFile: Bool, databases: [String], readOnly: Bool = false,
            openTimeout: Duration = .seconds(30)
        ) {
            self.initialMapSize = initialMapSize
            self.sync = sync
            self.setsAsideDamagedFile = setsAsideDamagedFile
            self.databases = databases
            self.readOnly = readOnly
            self.openTimeout = openTimeout
        }
    }

    /// How commits reach the disk. The disk tier picks one from its durability; only Storage/
    /// knows LMDB's flags for it.
    package enum SyncMode: Sendable, Equatable {
        /// Each commit syncs its data pages, not the meta page (`MDB_NOMETASYNC`).
        case everyCommit
        /// Commits skip the sync (`MDB_NOSYNC`); ``sync()`` makes them durable, and
        /// ``SyncedSnapshot`` keeps the last synced snapshot recoverable meanwhile.
        case onRequest
    }

    /// The opened cache directory (``StoreDirectory``): LMDB and every file swap go through it.
    package let directory: StoreDirectory
    /// The directory as the caller named it, for messages.
    @usableFromInline package let path: String
    package let writer: WriterThread
    package let databases: [String: Database]
    /// Replaced only by ``compactInPlace()``, under the exclusive resize lock; every other use
    /// holds that lock shared or runs on the writer thread.
    ///
    /// This and the other members below without `private` are internal only for Environment's
    /// extension files (opening, compaction, map size, readers).
    var env: OpaquePointer
    /// Set, under the exclusive resize lock, when `env` was closed and could not be opened again
    /// (a compaction's reopen failed): every later call throws it instead of touching `env`.
    var unusable: StorageError?
    /// Set when adopting a map another process grew failed: the next `MDB_MAP_RESIZED` is
    /// thrown as a clear error instead of adopting again, so a read or write cannot loop.
    let adoptionFailed = Atomic<Bool>(false)
    package let options: Options
    let resizeLock = ReadWriteLock()
    let logger: Logger
    /// Reset read transactions waiting to be renewed. With MDB_NOTLS each keeps its reader slot.
    private let idleReaders = Locked<[TransactionHandle]>([])
    /// In `.periodic` mode (`MDB_NOSYNC`), what keeps the last synced snapshot recoverable.
    let syncedSnapshot: SyncedSnapshot?
    /// The pages freed since the pinned snapshot, as far as counted (Environment+FreedPages.swift).
    let freedSinceSync = Locked(FreedPages())
    /// A read-only descriptor of `lock.mdb` for asking (`F_GETLK`) whether a reader's process
    /// holds LMDB's lock: nil until first needed, -1 when it could not be opened. Closed only in
    /// ``close()``, after LMDB closed its own: closing any descriptor of a file drops every
    /// `fcntl` lock the process holds on it, LMDB's included.
    let lockProbe = Locked<Int32?>(nil)
    private static let maxIdleReaders = 64
    /// How many times one write may grow the map before it is declared impossible.
    static let maxGrowthsPerWrite = 40

    private struct TransactionHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    struct MapResized: Error {}

    /// Opens the environment in `directory` (which must exist), setting a damaged file aside when
    /// `options.setsAsideDamagedFile` says so and no other process has the store open. The caller holds
    /// `presence` (shared) from before this call until after ``close()``.
    package static func open(directory: StoreDirectory, options: Options, presence: ProcessPresence, logger: Logger) throws
        -> Environment
    {
        if !options.readOnly {
            try SyncedSnapshot.recoverIfNeeded(directory: directory, presence: presence, logger: logger)
        }
        do {
            return try Environment(directory: directory, options: options, logger: logger)
        } catch let error as StorageError {
            guard case .damagedStore(_, let reason) = error, options.setsAsideDamagedFile, !options.readOnly else {
                throw error
            }
            // Renaming the file under another process's map would leave it writing to the
            // unlinked file: only a process alone on the store sets it aside.
            let reopened = try presence.alone { () throws -> Environment in
                let aside = SetAsideFiles.name(at: Date())
                logger.error(
                    "LMDBCache store is damaged; moving it aside and starting empty",
                    metadata: [
                        "path": .escaped(directory.path), "reason": .escaped(reason),
                        "movedTo": .escaped(directory.path + "/" + aside),
                    ])
                guard !ProcessPresence.lmdbOpenElsewhere(directory: directory) else {
                    throw StorageError.damagedStore(
                        path: directory.path,
                        reason: "\(reason); not moved aside while another process has the store open")
                }
                SyncedSnapshot.forget(directory: directory)
                guard renameat(directory.descriptor, StoreFiles.data, directory.descriptor, aside) == 0 else {
                    throw StorageError.damagedStore(
                        path: directory.path, reason: "\(reason); moving it aside failed: \(errnoText())")
                }
                SetAsideFiles.removeOld(in: directory, keeping: aside, logger: logger)
                return try Environment(directory: directory, options: options, logger: logger)
            }
            guard let reopened else {
                throw StorageError.damagedStore(
                    path: directory.path, reason: "\(reason); not moved aside while another process has the store open")
            }
            return reopened
        }
    }

    private init(directory: StoreDirectory, options: Options, logger: Logger) throws {
        self.directory = directory
        path = directory.path
        self.logger = logger
        self.options = options
        let periodic = !options.readOnly && options.sync == .onRequest
        if !options.readOnly && !periodic { SyncedSnapshot.forget(directory: directory) }
        let snapshot = periodic ? SyncedSnapshot(directory: directory) : nil
        let opened = try Self.openEnvironment(directory, options)
        if !options.readOnly {
            // Clearing stale slots writes to the lock file: not done when only inspecting.
            var dead: Int32 = 0
            mdb_reader_check(opened.env, &dead)
            if dead > 0 {
                logger.info(
                    "LMDBCache cleared stale reader slots", metadata: ["path": .escaped(path), "slots": "\(dead)"])
            }
        }
        // A dead process's pin went with its reader slot: pin and record this snapshot now.
        do {
            // No transaction of ours is active yet: another process's growth is adopted at once.
            while let snapshot, try !snapshot.syncAndRecord(opened.env) { mdb_env_set_mapsize(opened.env, 0) }
        } catch {
            mdb_env_close(opened.env)
            throw error
        }
        syncedSnapshot = snapshot
        (env, databases) = opened
        writer = WriterThread(name: "LMDBCache.writer")
    }

    /// Ends the writer thread and closes the environment. Call once, when no other call is running.
    package func close() {
        writer.stop()
        abortIdleReaders()
        syncedSnapshot?.release()
        if unusable == nil { mdb_env_close(env) }
        lockProbe.withLock { probe in
            if let descriptor = probe, descriptor >= 0 { Glibc.close(descriptor) }
            probe = -1
        }
    }

    // MARK: Reading

    /// Runs `body` in a read transaction taken from the pool. Never opens a write transaction.
    ///
    /// Inlinable (as are the package types it names, `@usableFromInline`): the disk tier's
    /// lookups call it for every read, and a generic function of a package type called from
    /// another module otherwise runs unspecialized, its result boxed and its closure called through
    /// a context (Swift 6.3 serializes the bodies of package declarations only when their type is
    /// `@usableFromInline`).
    @inlinable
    package func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
        let txn = try beginRead()
        defer { endRead(txn) }
        return try body(ReadTransaction(pointer: txn, path: path))
    }

    /// A read transaction from the pool (renewed) or a new one, with the resize lock held shared
    /// until ``endRead(_:)``; after a resize by another process, the grown map is adopted first.
    /// Every transaction it returns must be ended, once, on the thread that began it.
    @usableFromInline package func beginRead() throws -> OpaquePointer {
        while true {
            resizeLock.lockShared()
            do {
                if let unusable { throw unusable }
                return try takeReader()
            } catch is MapResized {
                resizeLock.unlockShared()
                adoptGrownMap()
                continue
            } catch {
                resizeLock.unlockShared()
                throw error
            }
        }
    }

    /// Resets `txn` and returns it to the pool (aborted when the pool is full), then releases
    /// the resize lock ``beginRead()`` took.
    @usableFromInline package func endRead(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        // Pooled (or aborted) before the shared lock is released: compaction closes the
        // environment under the exclusive lock, and a transaction of a closed environment
        // must never reach the pool.
        let pooled = idleReaders.withLock { readers in
            guard readers.count < Self.maxIdleReaders else { return false }
            readers.append(TransactionHandle(pointer: txn))
            return true
        }
        if !pooled { mdb_txn_abort(txn) }
        resizeLock.unlockShared()
    }

    private func takeReader() throws -> OpaquePointer {
        if let idle = idleReaders.withLock({ $0.popLast() }) {
            let code = mdb_txn_renew(idle.pointer)
            if code == MDB_SUCCESS { return idle.pointer }
            mdb_txn_abort(idle.pointer)
            if code == MDB_MAP_RESIZED { throw mapResized("reading the store") }
            try LMDBStatus.check(code, "mdb_txn_renew", path: path)
        }
        var txn: OpaquePointer?
        let code = mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn)
        if code == MDB_MAP_RESIZED { throw mapResized("reading the store") }
        try LMDBStatus.check(code, "mdb_txn_begin(read)", path: path)
        return txn!
    }

    // MARK: Writing

    /// Runs `body` in a write transaction and commits it. Must be called on ``writer``.
    ///
    /// When the map is full the transaction is aborted, the map grows and `body` runs again from
    /// the start, so `body` must change nothing outside the transaction before it returns.
    ///
    /// With `durably` in `.everyCommit` mode the commit also syncs its meta page (LMDB's durable
    /// commit: the data pages' fdatasync, then the meta page through LMDB's `O_DSYNC` descriptor),
    /// so on return this commit and every one before it survive a power loss without a separate
    /// ``sync()``. In `.onRequest` mode `durably` changes nothing: ``sync()`` is still needed.
    package func write<T>(durably: Bool = false, _ body: (WriteTransaction) throws -> T) throws -> T {
        precondition(writer.isCurrent, "LMDB write transactions run on the writer thread")
        var growths = 0
        while true {
            resizeLock.lockShared()
            if let unusable {
                resizeLock.unlockShared()
                throw unusable
            }
            var txn: OpaquePointer?
            let begin = mdb_txn_begin(env, nil, 0, &txn)
            if begin == MDB_MAP_RESIZED {
                resizeLock.unlockShared()
                if let failure = mapResized("writing to the store") as? StorageError { throw failure }
                adoptGrownMap()
                continue
            }
            guard begin == MDB_SUCCESS, let txn else {
                resizeLock.unlockShared()
                throw LMDBStatus.error(begin, "mdb_txn_begin(write)", path: path)
            }
            let result: T
            let transaction = WriteTransaction(pointer: txn, path: path)
            do {
                result = try body(transaction)
            } catch is MapFull {
                mdb_txn_abort(txn)
                resizeLock.unlockShared()
                growths += 1
                clearStaleReaders(before: "growing the map")
                try grow(attempt: growths)
                continue
            } catch {
                mdb_txn_abort(txn)
                resizeLock.unlockShared()
                throw error
            }
            let commit = commitTransaction(
                txn, durably: durably && options.sync == .everyCommit, changed: transaction.changes.changed)
            resizeLock.unlockShared()
            if commit == MDB_MAP_FULL {
                growths += 1
                clearStaleReaders(before: "growing the map")
                try grow(attempt: growths)
                continue
            }
            try LMDBStatus.check(commit, "mdb_txn_commit", path: path)
            return result
        }
    }

    /// Commits `txn`; `durably`, with `MDB_NOMETASYNC` cleared for this commit only. Only the
    /// writer thread changes the flag (LMDB allows it at any time, one thread at a time), and the
    /// writer is the only thread that commits, so no other commit sees it cleared. A transaction
    /// that `changed` nothing LMDB commits without syncing: then the file is synced instead,
    /// since earlier commits' meta pages may not be on disk yet.
    private func commitTransaction(_ txn: OpaquePointer, durably: Bool, changed: Bool) -> Int32 {
        guard durably else { return mdb_txn_commit(txn) }
        guard changed else {
            let commit = mdb_txn_commit(txn)
            return commit == MDB_SUCCESS ? mdb_env_sync(env, 1) : commit
        }
        let cleared = mdb_env_set_flags(env, UInt32(MDB_NOMETASYNC), 0)
        guard cleared == MDB_SUCCESS else {
            mdb_txn_abort(txn)
            return cleared
        }
        let commit = mdb_txn_commit(txn)
        // Cannot fail: the flag is one LMDB lets change, and it was just cleared the same way.
        _ = mdb_env_set_flags(env, UInt32(MDB_NOMETASYNC), 1)
        return commit
    }

    /// Writes buffered pages and the meta page to disk; in `.periodic` mode also records the
    /// synced snapshot and keeps it recoverable until the next sync (``SyncedSnapshot``).
    /// Writer thread only.
    package func sync() throws {
        while true {
            let done = try resizeLock.withSharedLock {
                if let unusable { throw unusable }
                guard let syncedSnapshot else {
                    try LMDBStatus.check(mdb_env_sync(env, 1), "mdb_env_sync", path: path)
                    return true
                }
                return try syncedSnapshot.syncAndRecord(env)
            }
            if done { return }
            adoptGrownMap()
        }
    }

    /// Runs `body` with the environment pointer, kept valid (no compaction swaps it) meanwhile.
    package func withEnvironmentPointer<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try resizeLock.withSharedLock {
            if let unusable { throw unusable }
            return try body(env)
        }
    }

    /// Aborts the pooled read transactions: before the environment closes or its map is replaced.
    func abortIdleReaders() {
        for reader in idleReaders.withLock({ readers in
            defer { readers.removeAll() }
            return readers
        }) {
            mdb_txn_abort(reader.pointer)
        }
    }
}

func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
