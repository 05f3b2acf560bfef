import CLMDB
import Glibc

// Compaction: a compacted copy of the data file swapped in under the exclusive resize lock.
extension Environment {
    /// Rewrites the store without free pages and swaps the copy in: `mdb_env_copy2` with
    /// `MDB_CP_COMPACT` into `compact.tmp/` in the directory, then, with every transaction of
    /// this process kept out, closes the environment, renames the copy over `data.mdb` (atomic)
    /// and opens it again. Writer only; the caller makes sure no other process has the store open.
    package func compactInPlace() throws {
        precondition(writer.isCurrent, "compaction runs on the writer thread")
        let temporary = directory.file(StoreFiles.compactionFolder)
        let shownTemporary = path + "/" + StoreFiles.compactionFolder
        try Self.removeCompactionFolder(temporary, shownAs: shownTemporary)
        guard mkdir(temporary, 0o700) == 0 else {
            throw StorageError.directoryUnavailable(path: shownTemporary, reason: "cannot create it: \(errnoText())")
        }
        defer { try? Self.removeCompactionFolder(temporary, shownAs: shownTemporary) }
        try resizeLock.withSharedLock {
            if let unusable { throw unusable }
            try LMDBStatus.check(
                mdb_env_copy2(env, temporary, UInt32(MDB_CP_COMPACT)), "mdb_env_copy2(compact)", path: path)
        }
        // mdb_env_copy2 creates the copy with mode 0644 less the umask: keep the store owner-only.
        guard chmod(temporary + "/" + StoreFiles.data, 0o600) == 0 else {
            throw StorageError.directoryUnavailable(
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
                let cacheError = error as? StorageError ?? .directoryUnavailable(path: path, reason: "\(error)")
                unusable = .directoryUnavailable(
                    path: path,
                    reason: "the store could not be opened again after compaction (\(cacheError)); reopen it")
                throw cacheError
            }
            if openElsewhere { throw StorageError.storeInUse(path: path, operation: "compact") }
            if !swapped {
                throw StorageError.directoryUnavailable(
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
                for name in [StoreFiles.data, StoreFiles.lock] { unlinkat(directory, name, 0) }
                Glibc.close(directory)
            }
            guard rmdir(folder) == 0 || errno == ENOENT else {
                throw StorageError.directoryUnavailable(path: shown, reason: "cannot remove it: \(errnoText())")
            }
        } else {
            guard unlink(folder) == 0 || errno == ENOENT else {
                throw StorageError.directoryUnavailable(path: shown, reason: "cannot remove it: \(errnoText())")
            }
        }
    }

    /// Creates and opens an environment on `store` with `options` and opens its databases
}
