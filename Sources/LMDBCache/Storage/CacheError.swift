/// An error thrown by LMDBCache.
///
/// Every failure the library can report is one of these cases, each with a message that says what
/// went wrong and, where there is one, what to do about it. LMDB's own return codes arrive as
/// ``lmdb(code:operation:message:)`` unless a more specific case describes them.
public enum CacheError: Error, Sendable, Equatable {
    /// The cache was closed; it cannot be used any more.
    case closed
    /// The key cannot be stored (for example, it is empty).
    case invalidKey(reason: String)
    /// A value is larger than the cache can hold (its cost limit, or LMDB's maximum record size).
    case valueTooLarge(size: Int, limit: Int)
    /// The cache directory cannot be created or opened.
    case directoryUnavailable(path: String, reason: String)
    /// The volume holding the cache has no room for the write.
    case diskFull(path: String)
    /// The store's file is damaged and the configuration asked to fail rather than recreate it.
    case damagedStore(path: String, reason: String)
    /// The store was written by a newer version of LMDBCache whose record format this one cannot
    /// read.
    case unsupportedFormat(path: String, found: Int, supported: Int)
    /// A fixed LMDB resource ran out (reader slots, databases, a transaction's dirty pages).
    case resourceExhausted(resource: String, operation: String)
    /// The operation needs the store to itself, and another process has it open.
    case storeInUse(path: String, operation: String)
    /// A cache name cannot be used as a directory name (empty, `.`, `..` or containing `/`).
    case invalidName(name: String, reason: String)
    /// A value could not be encoded or decoded by the cache's ``ValueCodec``.
    case codecFailed(operation: String, reason: String)
    /// A lookup that may not load (``LoadPolicy/cacheOnly``) found nothing.
    case notFound(key: String)
    /// Any other failure reported by LMDB or the operating system, with LMDB's code and message.
    case lmdb(code: Int32, operation: String, message: String)
}

extension CacheError: CustomStringConvertible {
    /// A one-line message saying what went wrong.
    public var description: String {
        switch self {
        case .closed:
            return "the cache is closed; open a new instance to use the directory again"
        case .invalidKey(let reason):
            return "invalid key: \(reason)"
        case .valueTooLarge(let size, let limit):
            return "value of \(size) bytes is larger than the limit of \(limit) bytes"
        case .directoryUnavailable(let path, let reason):
            return "cannot use cache directory \(path): \(reason)"
        case .diskFull(let path):
            return "no space left on the volume holding \(path)"
        case .damagedStore(let path, let reason):
            return "the store at \(path) is damaged (\(reason))"
        case .unsupportedFormat(let path, let found, let supported):
            return
                "the store at \(path) has record format \(found); this version reads format \(supported) and below"
        case .resourceExhausted(let resource, let operation):
            return "\(operation) failed: \(resource)"
        case .storeInUse(let path, let operation):
            return "cannot \(operation) the store at \(path) while another process has it open; close it there first"
        case .invalidName(let name, let reason):
            return "invalid cache name \"\(name)\": \(reason)"
        case .codecFailed(let operation, let reason):
            return "could not \(operation) a value: \(reason)"
        case .notFound(let key):
            return "no cached value for key \(key)"
        case .lmdb(let code, let operation, let message):
            return "\(operation) failed: \(message) (LMDB code \(code))"
        }
    }
}
