import CLMDB
import Glibc

// Opening an environment: LMDB's flags, the databases, and the checks of the files it opened.
extension Environment {
    /// LMDB's flags for `mode` (`MDB_NOTLS` and `MDB_NORDAHEAD` are always added).
    static func syncFlags(_ mode: SyncMode) -> Int32 {
        switch mode {
        case .everyCommit: MDB_NOMETASYNC
        case .onRequest: MDB_NOSYNC
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
    static func openEnvironment(_ store: StoreDirectory, _ options: Options) throws -> (
        env: OpaquePointer, databases: [String: Database]
    ) {
        let directory = store.path
        var created: OpaquePointer?
        try LMDBStatus.check(mdb_env_create(&created), "mdb_env_create", path: directory)
        guard let created else {
            throw StorageError.lmdb(code: -1, operation: "mdb_env_create", message: "no environment")
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
            let noLock =
                options.readOnly && fstatat(store.descriptor, StoreFiles.lock, &lockInfo, AT_SYMLINK_NOFOLLOW) != 0
            let flags = UInt32(
                MDB_NOTLS | MDB_NORDAHEAD | Self.syncFlags(options.sync) | access | (noLock ? MDB_NOLOCK : 0))
            let code = mdb_env_open(created, store.resolved, flags, 0o600)
            if code == ENOMEM, let reason = implausibleMeta(store) {
                throw StorageError.damagedStore(path: directory, reason: reason)
            }
            try LMDBStatus.check(code, "mdb_env_open", path: directory)
            try checkOpenedFiles(created, store)
            // Read-only opens never write; pages past a short file's end are free pages, which
            // reads through the tree do not reach.
            if !options.readOnly { try coverPagesInUse(created, directory) }
            var opened = try openDatabases(created, options, creating: false, path: directory)
            if opened == nil && !options.readOnly {
                opened = try openDatabases(created, options, creating: true, path: directory)
            }
            guard let opened else {
                throw StorageError.directoryUnavailable(
                    path: directory, reason: "not an LMDBCache store (it lacks one of its databases)")
            }
            try probe(created, directory, options.databases.compactMap { opened[$0]?.handle })
            return (created, opened)
        } catch {
            mdb_env_close(created)
            throw error
        }
    }

    /// Why the meta page LMDB opens `data.mdb` by cannot be right, or nil when it could: it asks
    /// for a map past any address space, or its last page lies far past the file's end. LMDB maps
    /// what the meta asks for, so such damage fails the open with ENOMEM, which on its own could
    /// also be a real shortage (an address-space limit), never a reason to set a store aside.
    /// Reads the two meta pages (LMDB 0.9's layout, 64-bit) as untrusted bytes.
    static func implausibleMeta(_ store: StoreDirectory) -> String? {
        let file = openat(store.descriptor, StoreFiles.data, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        guard file >= 0 else { return nil }
        defer { Glibc.close(file) }
        var info = stat()
        guard fstat(file, &info) == 0 else { return nil }
        let fileSize = UInt64(max(0, info.st_size))
        let pageSize = 4_096
        var pages = [UInt8](repeating: 0, count: 2 * pageSize)
        let read = pages.withUnsafeMutableBytes { pread(file, $0.baseAddress, $0.count, 0) }
        guard read == 2 * pageSize else { return nil }
        // The meta with the larger transaction id among those with LMDB's magic and version 1.
        let meta = pages.withUnsafeBytes { bytes -> (mapSize: UInt64, lastPage: UInt64, pageSize: UInt64)? in
            var chosen: (txnid: UInt64, mapSize: UInt64, lastPage: UInt64, pageSize: UInt64)?
            for page in 0..<2 {
                let base = page * pageSize + 16
                guard bytes.loadLE(UInt32.self, at: base) == 0xBEEF_C0DE, bytes.loadLE(UInt32.self, at: base + 4) == 1
                else { continue }
                let candidate = (
                    txnid: bytes.loadLE(UInt64.self, at: base + 128), mapSize: bytes.loadLE(UInt64.self, at: base + 16),
                    lastPage: bytes.loadLE(UInt64.self, at: base + 120),
                    pageSize: UInt64(bytes.loadLE(UInt32.self, at: base + 24))
                )
                if chosen.map({ candidate.txnid > $0.txnid }) ?? true { chosen = candidate }
            }
            return chosen.map { ($0.mapSize, $0.lastPage, $0.pageSize) }
        }
        guard let meta else { return nil }
        let addressSpace: UInt64 = 1 << 47
        let (pagesInUse, overflowPages) = meta.lastPage.addingReportingOverflow(1)
        let (committed, overflowBytes) = pagesInUse.multipliedReportingOverflow(by: max(meta.pageSize, 1))
        let (slack, overflowSlack) = fileSize.multipliedReportingOverflow(by: 2).partialValue.addingReportingOverflow(1 << 30)
        if overflowPages || overflowBytes || committed > addressSpace || (!overflowSlack && committed > slack)
        {
            return "its meta page says \(meta.lastPage) pages are in use, far past the file's \(fileSize) bytes"
        }
        if meta.mapSize > addressSpace {
            return "its meta page asks for a map of \(meta.mapSize) bytes, past any address space"
        }
        return nil
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
            if code == MDB_INCOMPATIBLE {
                // The store creates its databases with fixed flags, so a node for one of them
                // whose flags differ in the main database is the file's damage.
                mdb_txn_abort(txn)
                throw StorageError.damagedStore(
                    path: path,
                    reason: "mdb_dbi_open(\(name)): the data file's entry for this database has other flags")
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
            throw StorageError.directoryUnavailable(path: store.path, reason: "cannot set close-on-exec: \(errnoText())")
        }
        try store.checkStoreFiles()
        var opened = stat()
        var named = stat()
        guard fstat(descriptor, &opened) == 0,
            fstatat(store.descriptor, StoreFiles.data, &named, AT_SYMLINK_NOFOLLOW) == 0,
            opened.st_dev == named.st_dev, opened.st_ino == named.st_ino
        else {
            throw StorageError.directoryUnavailable(
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
            throw StorageError.directoryUnavailable(path: directory, reason: "cannot stat data.mdb: \(errnoText())")
        }
        let needed = (Int(info.me_last_pgno) + 1) * Int(statistics.ms_psize)
        guard Int(file.st_size) < needed else { return }
        let code = posix_fallocate(descriptor, 0, off_t(needed))
        if code == ENOSPC { throw StorageError.diskFull(path: directory) }
        if code != 0 {
            throw StorageError.directoryUnavailable(
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
}

extension UnsafeRawBufferPointer {
    /// The little-endian integer at `offset` (LMDB's meta page is little-endian on Linux's CPUs).
    fileprivate func loadLE<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
        T(littleEndian: loadUnaligned(fromByteOffset: offset, as: T.self))
    }
}
