/// What to do when the store's file turns out to be damaged on open.
public enum DamagedStorePolicy: Sendable {
    /// Move the damaged file aside (`data.mdb.damaged-<time>`, keeping the newest 3), log an error and start empty.
    case recreate
    /// Throw ``CacheError/damagedStore(path:reason:)``.
    case fail
}
