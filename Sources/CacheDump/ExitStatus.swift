import Glibc
import LMDBCache

/// The exit statuses of `cache-dump`, one per kind of outcome (LMDBCache.docc/CacheDump.md lists them).
public enum ExitStatus: Int32, CaseIterable, Sendable {
    /// Done.
    case success = 0
    /// `verify` found problems (or, with `--repair`, some remain).
    case problemsFound = 1
    /// No live entry under the key (`get`, `rm`).
    case keyNotFound = 2
    /// The path is not a cache directory (missing, not a directory, no store, not LMDBCache's).
    case notACache = 3
    /// The store or a record in it is damaged.
    case damaged = 4
    /// The store was written by a newer LMDBCache format.
    case unsupportedFormat = 5
    /// Another process has the store open, and the operation needs it alone.
    case storeInUse = 6
    /// An input file or argument value is not what it must be (an export file, a duration, a
    /// tag).
    case badInput = 7
    /// A symbolic link in the cache directory would lead elsewhere.
    case unsafePath = 8
    /// Anything else: an I/O or LMDB failure, a full disk.
    case failure = 9
    /// `clear` was not confirmed.
    case cancelled = 10
    /// Something is already at the `--output` path (a file, a symbolic link) and `--force` was
    /// not given.
    case outputExists = 11
    /// The command line is wrong (swift-argument-parser's status for validation errors).
    case usage = 64
}

/// A failure `cache-dump` reports as one line on standard error and an exit status.
public struct DumpFailure: Error, CustomStringConvertible, Sendable {
    public let status: ExitStatus
    public let message: String

    public init(_ status: ExitStatus, _ message: String) {
        self.status = status
        self.message = message
    }

    public var description: String { message }

    /// The failure for an error thrown by the library (or by the tool itself).
    public static func from(_ error: any Error) -> DumpFailure {
        if let failure = error as? DumpFailure { return failure }
        guard let cacheError = error as? CacheError else {
            return DumpFailure(.failure, "\(error)")
        }
        // Codes LMDB returns when a damaged page sends it astray while it works (the store opened
        // fine): EFAULT, a page pointing outside the map handed to the kernel (mdb_env_copy2
        // writing pages out); MDB_INCOMPATIBLE (-30784), a node whose flags say it is another
        // kind of database. In a sound store neither arises from what cache-dump asks.
        if case .lmdb(let code, let operation, let message) = cacheError, code == EFAULT || code == -30_784 {
            return DumpFailure(
                .damaged, "damaged store: \(operation) met a page that is not what it should be (\(message))")
        }
        // MDB_CURSOR_FULL and MDB_PAGE_FULL (the library words them as below): a tree deeper than
        // LMDB's 32 levels or a page whose sizes overflow it, which only a damaged page makes.
        if case .resourceExhausted(let resource, let operation) = cacheError, resource.contains("page or cursor stack")
        {
            return DumpFailure(
                .damaged, "damaged store: \(operation) met a page that is not what it should be (\(resource))")
        }
        let status: ExitStatus
        switch cacheError {
        case .directoryUnavailable: status = .notACache
        case .damagedStore: status = .damaged
        case .unsupportedFormat: status = .unsupportedFormat
        case .storeInUse: status = .storeInUse
        case .invalidKey, .invalidTag, .valueTooLarge: status = .badInput
        case .notFound: status = .keyNotFound
        default: status = .failure
        }
        return DumpFailure(status, cacheError.description)
    }
}
