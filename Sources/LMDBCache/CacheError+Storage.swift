import LMDBCacheStorage

extension CacheError {
    /// The error of the same case for a failure of the storage layer: the one place a
    /// ``StorageError`` becomes a ``CacheError``.
    package init(_ error: StorageError) {
        switch error {
        case .closed: self = .closed
        case .invalidKey(let reason): self = .invalidKey(reason: reason)
        case .directoryUnavailable(let path, let reason): self = .directoryUnavailable(path: path, reason: reason)
        case .diskFull(let path): self = .diskFull(path: path)
        case .damagedStore(let path, let reason): self = .damagedStore(path: path, reason: reason)
        case .resourceExhausted(let resource, let operation):
            self = .resourceExhausted(resource: resource, operation: operation)
        case .storeInUse(let path, let operation): self = .storeInUse(path: path, operation: operation)
        case .lmdb(let code, let operation, let message): self = .lmdb(code: code, operation: operation, message: message)
        }
    }
}

/// Runs `body`, a call into the storage layer, and throws each ``StorageError`` it throws as the
/// ``CacheError`` of the same case; every other error (the library's own, thrown from a
/// transaction's body) passes unchanged.
///
/// Every call from the disk tier into Storage that can throw goes through this, so no
/// `StorageError` leaves the Disk layer: callers above catch ``CacheError`` as before.
@inline(__always)
func storage<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as StorageError {
        throw CacheError(error)
    }
}
