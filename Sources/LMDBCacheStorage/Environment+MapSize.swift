import CLMDB
import Glibc
import Logging

// The memory map's size: growing it for a write, adopting another process's growth, and
// mapping the store again when a resize fails.
extension Environment {
    /// Current map size in bytes.
    package var mapSize: Int {
        resizeLock.withSharedLock { unusable == nil ? currentMapSize : 0 }
    }

    /// The map size, for callers already holding the resize lock.
    private var currentMapSize: Int {
        var info = MDB_envinfo()
        mdb_env_info(env, &info)
        return info.me_mapsize
    }

    /// Another process grew the map: take its size (no transaction of ours may be active).
    func adoptGrownMap() {
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
    func mapResized(_ operation: String) -> any Error {
        guard adoptionFailed.exchange(false, ordering: .acquiringAndReleasing) else { return MapResized() }
        return StorageError.resourceExhausted(
            resource: "address space to map the store at the size another process grew it to", operation: operation)
    }

    func grow(attempt: Int) throws {
        guard attempt <= Self.maxGrowthsPerWrite else { throw StorageError.diskFull(path: path) }
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
                throw StorageError.diskFull(path: path)
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
            unusable = StorageError.resourceExhausted(
                resource:
                    "address space for the store's memory map (mapping it failed: \(errnoText(code)); "
                    + "opening it again failed: \(error)); close the cache and open it again",
                operation: "using the store at \(path)")
            logger.error(
                "LMDBCache cannot map its store; every call fails until it is opened again",
                metadata: ["path": .escaped(path), "reason": .escaped(error)])
        }
    }
}
