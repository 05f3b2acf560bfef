import CLMDB
import Foundation
import Glibc
import Logging
import Synchronization

/// What to do when the store's file turns out to be damaged on open.
public enum DamagedStorePolicy: Sendable {
    /// Move the damaged file aside (`data.mdb.damaged-<time>`, keeping the newest 3), log an error and start empty.
    case recreate
    /// Throw ``CacheError/damagedStore(path:reason:)``.
    case fail
}

/// One open LMDB environment (a directory holding `data.mdb` and `lock.mdb`).
///
/// Owns the memory map and its growth, a pool of reusable read transactions, and the writer
/// thread. Environments are opened only by objects shared through ``DirectoryRegistry``, so a
/// directory is open at most once per process, as LMDB requires.
final class Environment: @unchecked Sendable {
    struct Options: Sendable {
        var initialMapSize: Int
        var maxReaders: UInt32 = 1_024
        /// Extra sync flags (`MDB_NOMETASYNC`, `MDB_NOSYNC`); `MDB_NOTLS` is always added.
        var syncFlags: Int32
        var damagedStore: DamagedStorePolicy
        var databases: [String]
        /// Opens with `MDB_RDONLY`: no write transaction, no file created, the databases must
        /// exist. For inspecting a store (`cache-dump`) without changing it.
        var readOnly = false
        /// How long an open waits while another process has the store to itself.
        var openTimeout: Duration = .seconds(30)
    }

    /// The opened cache directory (``StoreDirectory``): LMDB and every file swap go through it.
    let directory: StoreDirectory
    /// The directory as the caller named it, for messages.
    let path: String
    let writer: WriterThread
    let databases: [String: Database]
    /// Replaced only by ``compactInPlace()``, under the exclusive resize lock; every other use
    /// holds that lock shared or runs on the writer thread.
    private var env: OpaquePointer
    /// Set, under the exclusive resize lock, when `env` was closed and could not be opened again
    /// (a compaction's reopen failed): every later call throws it instead of touching `env`.
    private var unusable: CacheError?
    /// Set when adopting a map another process grew failed: the next `MDB_MAP_RESIZED` is
    /// thrown as a clear error instead of adopting again, so a read or write cannot loop.
    private let adoptionFailed = Atomic<Bool>(false)
    private let options: Options
    private let resizeLock = ReadWriteLock()
    private let logger: Logger
    /// Reset read transactions waiting to be renewed. With MDB_NOTLS each keeps its reader slot.
    private let idleReaders = Locked<[TransactionHandle]>([])
    /// In `.periodic` mode (`MDB_NOSYNC`), what keeps the last synced snapshot recoverable.
    private let syncedSnapshot: SyncedSnapshot?
    /// A read-only descriptor of `lock.mdb` for asking (`F_GETLK`) whether a reader's process
    /// holds LMDB's lock: nil until first needed, -1 when it could not be opened. Closed only in
    /// ``close()``, after LMDB closed its own: closing any descriptor of a file drops every
    /// `fcntl` lock the process holds on it, LMDB's included.
    private let lockProbe = Locked<Int32?>(nil)
    private static let maxIdleReaders = 64
    /// How many times one write may grow the map before it is declared impossible.
    private static let maxGrowthsPerWrite = 40

    private struct TransactionHandle: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private struct MapResized: Error {}

    /// Opens the environment in `directory` (which must exist), setting a damaged file aside when
    /// `options.damagedStore` says so and no other process has the store open. The caller holds
    /// `presence` (shared) from before this call until after ``close()``.
    static func open(directory: StoreDirectory, options: Options, presence: ProcessPresence, logger: Logger) throws
        -> Environment
    {
        if !options.readOnly {
            try SyncedSnapshot.recoverIfNeeded(directory: directory, presence: presence, logger: logger)
        }
        do {
            return try Environment(directory: directory, options: options, logger: logger)
        } catch let error as CacheError {
            guard case .damagedStore(_, let reason) = error, options.damagedStore == .recreate, !options.readOnly else {
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
                    throw CacheError.damagedStore(
                        path: directory.path,
                        reason: "\(reason); not moved aside while another process has the store open")
                }
                SyncedSnapshot.forget(directory: directory)
                guard renameat(directory.descriptor, StoreFiles.data, directory.descriptor, aside) == 0 else {
                    throw CacheError.damagedStore(
                        path: directory.path, reason: "\(reason); moving it aside failed: \(errnoText())")
                }
                SetAsideFiles.removeOld(in: directory, keeping: aside, logger: logger)
                return try Environment(directory: directory, options: options, logger: logger)
            }
            guard let reopened else {
                throw CacheError.damagedStore(
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
        let periodic = !options.readOnly && options.syncFlags & MDB_NOSYNC != 0
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
    func close() {
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
    func read<T>(_ body: (ReadTransaction) throws -> T) throws -> T {
        while true {
            resizeLock.lockShared()
            let txn: OpaquePointer
            do {
                if let unusable { throw unusable }
                txn = try takeReader()
            } catch is MapResized {
                resizeLock.unlockShared()
                adoptGrownMap()
                continue
            } catch {
                resizeLock.unlockShared()
                throw error
            }
            let result = Result { try body(ReadTransaction(pointer: txn, path: path)) }
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
            return try result.get()
        }
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
    func write<T>(_ body: (WriteTransaction) throws -> T) throws -> T {
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
                if let failure = mapResized("writing to the store") as? CacheError { throw failure }
                adoptGrownMap()
                continue
            }
            guard begin == MDB_SUCCESS, let txn else {
                resizeLock.unlockShared()
                throw LMDBStatus.error(begin, "mdb_txn_begin(write)", path: path)
            }
            let result: T
            do {
                result = try body(WriteTransaction(pointer: txn, path: path))
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
            let commit = mdb_txn_commit(txn)
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

    // MARK: Compaction

    /// Rewrites the store without free pages and swaps the copy in: `mdb_env_copy2` with
    /// `MDB_CP_COMPACT` into `compact.tmp/` in the directory, then, with every transaction of
    /// this process kept out, closes the environment, renames the copy over `data.mdb` (atomic)
    /// and opens it again. Writer only; the caller makes sure no other process has the store open.
    func compactInPlace() throws {
        precondition(writer.isCurrent, "compaction runs on the writer thread")
        let temporary = directory.file(StoreFiles.compactionFolder)
        let shownTemporary = path + "/" + StoreFiles.compactionFolder
        try Self.removeCompactionFolder(temporary, shownAs: shownTemporary)
        guard mkdir(temporary, 0o700) == 0 else {
            throw CacheError.directoryUnavailable(path: shownTemporary, reason: "cannot create it: \(errnoText())")
        }
        defer { try? Self.removeCompactionFolder(temporary, shownAs: shownTemporary) }
        try resizeLock.withSharedLock {
            if let unusable { throw unusable }
            try LMDBStatus.check(
                mdb_env_copy2(env, temporary, UInt32(MDB_CP_COMPACT)), "mdb_env_copy2(compact)", path: path)
        }
        // mdb_env_copy2 creates the copy with mode 0644 less the umask: keep the store owner-only.
        guard chmod(temporary + "/" + StoreFiles.data, 0o600) == 0 else {
            throw CacheError.directoryUnavailable(
                path: shownTemporary, reason: "cannot restrict the copy: \(errnoText())")
        }
        do {
            try swapInCompactedCopy(from: temporary)
        } catch {
            if syncedSnapshot != nil { try? sync() }
            throw error
        }
        // The record named the old file; pin and record the compacted one.
        try sync()
    }

    /// The exclusive part of ``compactInPlace()``: closes the environment, renames the copy over
    /// the data file unless another process has it open, and opens the environment again.
    private func swapInCompactedCopy(from temporary: String) throws {
        try resizeLock.withExclusiveLock {
            abortIdleReaders()
            syncedSnapshot?.release()
            mdb_env_close(env)
            // With this process's environment closed, LMDB's lock shows openers the presence
            // lock missed: the old file stays, as the copy would lose their writes or the store.
            let openElsewhere = ProcessPresence.lmdbOpenElsewhere(directory: directory)
            // The pin went with the environment: the record must not outlive it, whether or not
            // the file is swapped (the sync after this block records and pins again).
            if syncedSnapshot != nil { SyncedSnapshot.forget(directory: directory) }
            let swapped =
                !openElsewhere && rename(temporary + "/" + StoreFiles.data, directory.file(StoreFiles.data)) == 0
            let renameFailure = swapped || openElsewhere ? "" : errnoText()
            do {
                // The compacted file, or the old one still in place.
                env = try Self.openEnvironment(directory, options).env
            } catch {
                // `env` is closed: no later call may touch it, and close() must not close it again.
                let cacheError = error as? CacheError ?? .directoryUnavailable(path: path, reason: "\(error)")
                unusable = .directoryUnavailable(
                    path: path,
                    reason: "the store could not be opened again after compaction (\(cacheError)); reopen it")
                throw cacheError
            }
            if openElsewhere { throw CacheError.storeInUse(path: path, operation: "compact") }
            if !swapped {
                throw CacheError.directoryUnavailable(
                    path: path, reason: "cannot swap in the compacted file: \(renameFailure)")
            }
        }
    }

    /// Removes what a crashed compaction left at `folder`: the folder with the copy and its lock
    /// file, or anything else under that name (a symbolic link is removed, never followed).
    private static func removeCompactionFolder(_ folder: String, shownAs shown: String) throws {
        var info = stat()
        guard lstat(folder, &info) == 0 else { return }
        if info.st_mode & S_IFMT == S_IFDIR {
            let directory = Glibc.open(folder, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
            if directory >= 0 {
                for name in [StoreFiles.data, "lock.mdb"] { unlinkat(directory, name, 0) }
                Glibc.close(directory)
            }
            guard rmdir(folder) == 0 || errno == ENOENT else {
                throw CacheError.directoryUnavailable(path: shown, reason: "cannot remove it: \(errnoText())")
            }
        } else {
            guard unlink(folder) == 0 || errno == ENOENT else {
                throw CacheError.directoryUnavailable(path: shown, reason: "cannot remove it: \(errnoText())")
            }
        }
    }

    /// Creates and opens an environment on `store` with `options` and opens its databases
    /// (creating them unless read-only). Database handles are per environment: opened in the same
    /// order each time, they keep the numbers the store's handles already hold.
    ///
    /// LMDB is given the opened directory (``StoreDirectory/resolved``), never the name again.
    /// When the databases exist they are opened in a read transaction: opening a store takes no
    /// write transaction, so another process holding LMDB's writer lock (stopped with Ctrl-Z,
    /// say) cannot hold the open up.
    private static func openEnvironment(_ store: StoreDirectory, _ options: Options) throws -> (
        env: OpaquePointer, databases: [String: Database]
    ) {
        let directory = store.path
        var created: OpaquePointer?
        try LMDBStatus.check(mdb_env_create(&created), "mdb_env_create", path: directory)
        guard let created else {
            throw CacheError.lmdb(code: -1, operation: "mdb_env_create", message: "no environment")
        }
        do {
            try LMDBStatus.check(
                mdb_env_set_maxreaders(created, options.maxReaders), "mdb_env_set_maxreaders", path: directory)
            try LMDBStatus.check(
                mdb_env_set_maxdbs(created, UInt32(options.databases.count + 2)), "mdb_env_set_maxdbs", path: directory)
            try LMDBStatus.check(
                mdb_env_set_mapsize(created, options.initialMapSize), "mdb_env_set_mapsize", path: directory)
            let access = options.readOnly ? MDB_RDONLY : 0
            // A read-only open creates nothing, but LMDB creates a missing lock.mdb even with
            // MDB_RDONLY. Every open that can write creates lock.mdb and nothing deletes it, so
            // without one no process has the store open and there is no reader table to join:
            // MDB_NOLOCK reads without one. A writer starting meanwhile cannot see this reader and
            // may reuse pages it reads: the reader may then meet damage, never change the store.
            var lockInfo = stat()
            let noLock = options.readOnly && fstatat(store.descriptor, "lock.mdb", &lockInfo, AT_SYMLINK_NOFOLLOW) != 0
            let flags = UInt32(MDB_NOTLS | MDB_NORDAHEAD | options.syncFlags | access | (noLock ? MDB_NOLOCK : 0))
            try LMDBStatus.check(mdb_env_open(created, store.resolved, flags, 0o600), "mdb_env_open", path: directory)
            try checkOpenedFiles(created, store)
            // Read-only opens never write; pages past a short file's end are free pages, which
            // reads through the tree do not reach.
            if !options.readOnly { try coverPagesInUse(created, directory) }
            var opened = try openDatabases(created, options, creating: false, path: directory)
            if opened == nil && !options.readOnly {
                opened = try openDatabases(created, options, creating: true, path: directory)
            }
            guard let opened else {
                throw CacheError.directoryUnavailable(
                    path: directory, reason: "not an LMDBCache store (it lacks one of its databases)")
            }
            try probe(created, directory, options.databases.compactMap { opened[$0]?.handle })
            return (created, opened)
        } catch {
            mdb_env_close(created)
            throw error
        }
    }

    /// Opens every database of `options` in one transaction: a read transaction that returns nil
    /// when one is missing, or with `creating`, a write transaction that creates the missing ones.
    private static func openDatabases(_ env: OpaquePointer, _ options: Options, creating: Bool, path: String) throws
        -> [String: Database]?
    {
        var txn: OpaquePointer?
        try LMDBStatus.check(
            mdb_txn_begin(env, nil, creating ? 0 : UInt32(MDB_RDONLY), &txn), "mdb_txn_begin", path: path)
        var opened: [String: Database] = [:]
        for name in options.databases {
            var dbi: MDB_dbi = 0
            let code = mdb_dbi_open(txn, name, creating ? UInt32(MDB_CREATE) : 0, &dbi)
            if code == MDB_NOTFOUND && !creating {
                mdb_txn_abort(txn)
                return nil
            }
            if code != MDB_SUCCESS {
                mdb_txn_abort(txn)
                throw LMDBStatus.error(code, "mdb_dbi_open(\(name))", path: path)
            }
            opened[name] = Database(handle: dbi)
        }
        try LMDBStatus.check(mdb_txn_commit(txn), "mdb_txn_commit", path: path)
        return opened
    }

    /// After `mdb_env_open`: the data file LMDB opened is the store's `data.mdb` (a regular file
    /// of this user with one link, checked again now that it exists), and its descriptor is
    /// closed on exec, so no child process inherits write access to the store (LMDB opens it
    /// without `O_CLOEXEC`).
    private static func checkOpenedFiles(_ env: OpaquePointer, _ store: StoreDirectory) throws {
        var descriptor: Int32 = -1
        try LMDBStatus.check(mdb_env_get_fd(env, &descriptor), "mdb_env_get_fd", path: store.path)
        let flags = fcntl(descriptor, F_GETFD)
        guard flags >= 0, fcntl(descriptor, F_SETFD, flags | FD_CLOEXEC) == 0 else {
            throw CacheError.directoryUnavailable(path: store.path, reason: "cannot set close-on-exec: \(errnoText())")
        }
        try store.checkStoreFiles()
        var opened = stat()
        var named = stat()
        guard fstat(descriptor, &opened) == 0,
            fstatat(store.descriptor, StoreFiles.data, &named, AT_SYMLINK_NOFOLLOW) == 0,
            opened.st_dev == named.st_dev, opened.st_ino == named.st_ino
        else {
            throw CacheError.directoryUnavailable(
                path: store.path, reason: "data.mdb changed while it was opened; another process replaced it")
        }
    }

    /// Makes the data file reach the end of the pages its newest meta page counts.
    ///
    /// LMDB does not write pages a transaction allocated and freed again, so a sound file may end
    /// before them; a truncated file ends before pages in use. Either way, touching a mapped page
    /// past the end of the file would kill the process with SIGBUS. Extended (never shrunk, so
    /// another process's writes are safe), the missing pages read as zeros, which LMDB reports as
    /// damage and ``probe(_:_:_:)`` finds near the roots.
    private static func coverPagesInUse(_ env: OpaquePointer, _ directory: String) throws {
        var info = MDB_envinfo()
        var statistics = MDB_stat()
        try LMDBStatus.check(mdb_env_info(env, &info), "mdb_env_info", path: directory)
        try LMDBStatus.check(mdb_env_stat(env, &statistics), "mdb_env_stat", path: directory)
        var descriptor: Int32 = -1
        try LMDBStatus.check(mdb_env_get_fd(env, &descriptor), "mdb_env_get_fd", path: directory)
        var file = stat()
        guard fstat(descriptor, &file) == 0 else {
            throw CacheError.directoryUnavailable(path: directory, reason: "cannot stat data.mdb: \(errnoText())")
        }
        let needed = (Int(info.me_last_pgno) + 1) * Int(statistics.ms_psize)
        guard Int(file.st_size) < needed else { return }
        let code = posix_fallocate(descriptor, 0, off_t(needed))
        if code == ENOSPC { throw CacheError.diskFull(path: directory) }
        if code != 0 {
            throw CacheError.directoryUnavailable(
                path: directory, reason: "cannot extend data.mdb to its pages in use: \(errnoText(code))")
        }
    }

    /// Reads the first and last entry of every database, so damage near the roots (a truncated
    /// file's missing pages, a damaged branch page) is found on open, where the store can still be
    /// set aside, rather than by later reads.
    private static func probe(_ env: OpaquePointer, _ directory: String, _ databases: [MDB_dbi]) throws {
        var txn: OpaquePointer?
        try LMDBStatus.check(
            mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin(probe)", path: directory)
        defer { mdb_txn_abort(txn) }
        for dbi in databases {
            var cursor: OpaquePointer?
            try LMDBStatus.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open(probe)", path: directory)
            defer { mdb_cursor_close(cursor) }
            var key = MDB_val()
            var value = MDB_val()
            for operation in [MDB_FIRST, MDB_LAST] {
                let code = mdb_cursor_get(cursor, &key, &value, operation)
                if code != MDB_SUCCESS && code != MDB_NOTFOUND {
                    throw LMDBStatus.error(code, "reading the store's first and last entries", path: directory)
                }
            }
        }
    }

    private func abortIdleReaders() {
        for reader in idleReaders.withLock({ readers in
            defer { readers.removeAll() }
            return readers
        }) {
            mdb_txn_abort(reader.pointer)
        }
    }

    /// Writes buffered pages and the meta page to disk; in `.periodic` mode also records the
    /// synced snapshot and keeps it recoverable until the next sync (``SyncedSnapshot``).
    /// Writer thread only.
    func sync() throws {
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

    // MARK: Map size

    /// Current map size in bytes.
    var mapSize: Int {
        resizeLock.withSharedLock { unusable == nil ? currentMapSize : 0 }
    }

    /// The map size, for callers already holding the resize lock.
    private var currentMapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Another process grew the map: take its size (no transaction of ours may be active).
    private func adoptGrownMap() {
        resizeLock.withExclusiveLock {
            guard unusable == nil else { return }
            let previous = currentMapSize
            let code = mdb_env_set_mapsize(env, 0)
            if code == MDB_SUCCESS {
                adoptionFailed.store(false, ordering: .releasing)
                return
            }
            logger.error(
                "LMDBCache could not adopt a grown map",
                metadata: ["path": .escaped(path), "code": "\(code)", "reason": "\(errnoText(code))"])
            // EINVAL (a transaction active) is refused before LMDB unmaps anything.
            if code != EINVAL { recoverMap(previousSize: previous, failure: code) }
            adoptionFailed.store(true, ordering: .releasing)
        }
    }

    /// What `MDB_MAP_RESIZED` means now: adopt the grown map and retry (``MapResized``), or, right
    /// after adopting failed, a clear error (the flag is consumed, so a later call tries again).
    private func mapResized(_ operation: String) -> any Error {
        guard adoptionFailed.exchange(false, ordering: .acquiringAndReleasing) else { return MapResized() }
        return CacheError.resourceExhausted(
            resource: "address space to map the store at the size another process grew it to", operation: operation)
    }

    private func grow(attempt: Int) throws {
        guard attempt <= Self.maxGrowthsPerWrite else { throw CacheError.diskFull(path: path) }
        try resizeLock.withExclusiveLock {
            if let unusable { throw unusable }
            let current = currentMapSize
            // Double while small, then grow by 1 GiB at a time.
            let next = current + min(max(current, 16 << 20), 1 << 30)
            let code = mdb_env_set_mapsize(env, next)
            // EINVAL (a transaction active) is refused before LMDB unmaps anything.
            if code == EINVAL { throw LMDBStatus.error(code, "mdb_env_set_mapsize", path: path) }
            guard code == MDB_SUCCESS else {
                logger.error(
                    "LMDBCache could not grow its map",
                    metadata: [
                        "path": .escaped(path), "from": "\(current)", "to": "\(next)", "reason": "\(errnoText(code))",
                    ])
                recoverMap(previousSize: current, failure: code)
                // The write needs a bigger map and cannot have one: as good as a full disk.
                throw CacheError.diskFull(path: path)
            }
            logger.debug(
                "LMDBCache grew its map", metadata: ["path": .escaped(path), "from": "\(current)", "to": "\(next)"])
        }
    }

    /// Makes the environment usable again after `mdb_env_set_mapsize` failed. Call under the
    /// exclusive resize lock.
    ///
    /// LMDB unmaps the old map before mapping the new size; when mapping fails (`mmap` ENOMEM
    /// under an address-space limit) it keeps no map, its meta pointers still point into the
    /// freed one, and a later resize only records the size without mapping. So the environment
    /// is closed and opened again at the size that was mapped before (the data fits it). When
    /// that fails too, `env` stays closed and ``unusable`` makes every later call throw.
    private func recoverMap(previousSize: Int, failure code: Int32) {
        abortIdleReaders()
        // The pin is a transaction of the environment about to close. Until the next sync pins
        // again, the recorded snapshot's pages may be reused: its record must not be applied.
        if let syncedSnapshot {
            syncedSnapshot.release()
            SyncedSnapshot.forget(directory: directory)
        }
        mdb_env_close(env)
        var reopening = options
        reopening.initialMapSize = previousSize
        do {
            env = try Self.openEnvironment(directory, reopening).env
            logger.info("LMDBCache mapped its store again at the previous size", metadata: ["path": .escaped(path)])
        } catch {
            unusable = CacheError.resourceExhausted(
                resource:
                    "address space for the store's memory map (mapping it failed: \(errnoText(code)); "
                    + "opening it again failed: \(error)); close the cache and open it again",
                operation: "using the store at \(path)")
            logger.error(
                "LMDBCache cannot map its store; every call fails until it is opened again",
                metadata: ["path": .escaped(path), "reason": .escaped(error)])
        }
    }

    /// Runs `body` with the environment pointer, kept valid (no compaction swaps it) meanwhile.
    func withEnvironmentPointer<T>(_ body: (OpaquePointer) throws -> T) throws -> T {
        try resizeLock.withSharedLock {
            if let unusable { throw unusable }
            return try body(env)
        }
    }

    // MARK: Readers

    /// Runs `body` with a descriptor of `lock.mdb` that `fcntl(F_GETLK)` can ask about LMDB's
    /// locks (opened on first use and kept until ``close()``), or -1 when it cannot be opened.
    func withLockProbe<T>(_ body: (Int32) throws -> T) rethrows -> T {
        try lockProbe.withLock { probe in
            if probe == nil {
                // Reading is enough: F_GETLK asks about locks without taking one.
                probe = openat(directory.descriptor, "lock.mdb", O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
            }
            return try body(probe ?? -1)
        }
    }

    /// Clears reader slots left by processes that died; returns how many were cleared.
    @discardableResult
    func clearStaleReaders() -> Int {
        var dead: Int32 = 0
        resizeLock.withSharedLock { if unusable == nil { _ = mdb_reader_check(env, &dead) } }
        return Int(dead)
    }

    /// Clears stale reader slots, logging any it cleared. A process killed during a read leaves
    /// its slot pinning the snapshot it read, and LMDB then reuses no page freed since: the file
    /// grows. Done by every trim pass and before the map grows, not only at open.
    func clearStaleReaders(before occasion: String) {
        let cleared = clearStaleReaders()
        if cleared > 0 {
            logger.info(
                "LMDBCache cleared stale reader slots",
                metadata: ["path": .escaped(path), "slots": "\(cleared)", "before": "\(occasion)"])
        }
    }
}

func errnoText(_ code: Int32 = errno) -> String {
    String(cString: strerror(code))
}
