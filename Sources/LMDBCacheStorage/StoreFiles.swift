/// The names LMDBCache uses inside a cache directory: one place for tools that must know them.
package enum StoreFiles {
    /// LMDB's data file (its name is LMDB's own).
    package static let data = "data.mdb"
    /// LMDB's lock file, holding its reader table (its name is LMDB's own).
    package static let lock = "lock.mdb"
    /// The lock every process with the store open holds shared (``ProcessPresence``).
    package static let processPresence = "processes.lock"
    /// The file of space kept back for a full volume (``SpaceReserve``).
    package static let spaceReserve = "space.reserve"
    /// A `.periodic` store's record of its last synced snapshot (``SyncedSnapshot``).
    package static let syncedSnapshot = "synced-snapshot"
    /// Regular files, which must belong to the user and not be symbolic links: LMDB's data and
    /// lock files, the process-presence lock, the space reserve and the synced-snapshot record.
    package static let regular = [data, lock, processPresence, spaceReserve, syncedSnapshot]
    /// The folder compaction copies into; only a crash during a copy leaves it behind.
    package static let compactionFolder = "compact.tmp"
}
