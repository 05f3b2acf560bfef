import CLMDB
import Glibc

/// Maps LMDB return codes to ``StorageError``: the one place that knows what each code means.
@usableFromInline package enum LMDBStatus {
    /// `MDB_READERS_FULL`, for the fault-injection tests, which make LMDB's calls return it.
    package static let readersFull: Int32 = MDB_READERS_FULL

    /// Throws the ``StorageError`` for `code` unless it is `MDB_SUCCESS`.
    @inlinable @inline(__always)
    package static func check(_ code: Int32, _ operation: @autoclosure () -> String, path: String) throws {
        if code != MDB_SUCCESS {
            throw error(code, operation(), path: path)
        }
    }

    /// True for the codes that mean the file itself is damaged.
    package static func isDamage(_ code: Int32) -> Bool {
        switch code {
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND, MDB_INVALID, MDB_VERSION_MISMATCH, MDB_PANIC:
            return true
        default:
            return false
        }
    }

    @usableFromInline package static func error(_ code: Int32, _ operation: String, path: String) -> StorageError {
        switch code {
        case MDB_CORRUPTED, MDB_PAGE_NOTFOUND:
            return .damagedStore(path: path, reason: "\(operation): the data file's pages are inconsistent")
        case MDB_INVALID:
            return .damagedStore(path: path, reason: "\(operation): the data file is not an LMDB store")
        case MDB_VERSION_MISMATCH:
            return .damagedStore(path: path, reason: "\(operation): the file was written by another LMDB version")
        case MDB_PANIC:
            return .damagedStore(path: path, reason: "\(operation): LMDB hit a fatal error; reopen the cache")
        case MDB_MAP_FULL:
            return .diskFull(path: path)
        case ENOSPC, EFBIG, EDQUOT:
            return .diskFull(path: path)
        case EIO where VolumeSpace.isNearlyFull(at: path):
            // LMDB reports a short write as EIO: on a volume with no room left, that is a full disk.
            return .diskFull(path: path)
        case MDB_READERS_FULL:
            return .resourceExhausted(resource: "every reader slot is in use", operation: operation)
        case MDB_DBS_FULL:
            return .resourceExhausted(resource: "the environment's database limit is reached", operation: operation)
        case MDB_TXN_FULL:
            return .resourceExhausted(resource: "the transaction has too many dirty pages", operation: operation)
        case MDB_TLS_FULL:
            return .resourceExhausted(resource: "too many threads hold LMDB transactions", operation: operation)
        case MDB_CURSOR_FULL, MDB_PAGE_FULL:
            return .resourceExhausted(resource: "an LMDB page or cursor stack is full", operation: operation)
        case MDB_BAD_VALSIZE:
            return .invalidKey(reason: "\(operation): key or value size is outside LMDB's limits")
        case EACCES, EPERM, EROFS:
            return .directoryUnavailable(path: path, reason: "\(operation): permission denied")
        default:
            let message = String(cString: mdb_strerror(code))
            return .lmdb(code: code, operation: operation, message: message)
        }
    }
}
