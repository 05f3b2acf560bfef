import LMDBCacheStorage

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
    /// A tag cannot be stored: it is empty or longer than 255 UTF-8 bytes, or an entry was
    /// given more than 32 distinct tags.
    case invalidTag(reason: String)
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
    ///
    /// `key` is the key's description as given, for matching; the error's ``CacheError/description`` shows
    /// it escaped and cut to 64 characters, so logging the error is safe whatever the key holds.
    /// Logging `key` itself is not.
    case notFound(key: String)
    /// A get-or-load waited its ``Freshness/hardTimeout`` for the loader and had no stale value
    /// to serve. The load goes on in the background, and its result is stored.
    ///
    /// `key` is the key's description as given, as in ``notFound(key:)``.
    case loadTimedOut(key: String, after: Duration)
    /// A configuration cannot be used (a remote tier with no endpoint, TLS settings that do not
    /// load).
    case invalidConfiguration(reason: String)
    /// Any other failure reported by LMDB or the operating system, with LMDB's code and message.
    case lmdb(code: Int32, operation: String, message: String)
}

extension CacheError: CustomStringConvertible {
    /// A one-line message saying what went wrong.
    ///
    /// The text a case carries (a key, a path, a name, another error's message) is escaped as the
    /// inside of a Swift string literal (`\n`, `\"`, `\\`, and `\u{XXXX}` for every other
    /// control character, Unicode format character such as a bidi control, line or paragraph
    /// separator and unassigned code point) and cut short, ending `…[N bytes]`: a key after 64
    /// characters, other text after 1,024. So a message is one line that holds nothing a client
    /// could use to forge a log line or rewrite a terminal, whatever the key. The associated
    /// values keep the text as it was. The cases the storage layer also throws take its wording
    /// (`StorageError`'s description), so each message is written once.
    public var description: String {
        let text = { (text: String) in LoggedText.render(text) }
        switch self {
        case .closed:
            return StorageError.closed.description
        case .invalidKey(let reason):
            return StorageError.invalidKey(reason: reason).description
        case .invalidConfiguration(let reason):
            return "invalid configuration: \(text(reason))"
        case .invalidTag(let reason):
            return "invalid tag: \(text(reason))"
        case .valueTooLarge(let size, let limit):
            return "value of \(size) bytes is larger than the limit of \(limit) bytes"
        case .directoryUnavailable(let path, let reason):
            return StorageError.directoryUnavailable(path: path, reason: reason).description
        case .diskFull(let path):
            return StorageError.diskFull(path: path).description
        case .damagedStore(let path, let reason):
            return StorageError.damagedStore(path: path, reason: reason).description
        case .unsupportedFormat(let path, let found, let supported):
            return
                "the store at \(text(path)) has record format \(found); this version reads format \(supported) and below"
        case .resourceExhausted(let resource, let operation):
            return StorageError.resourceExhausted(resource: resource, operation: operation).description
        case .storeInUse(let path, let operation):
            return StorageError.storeInUse(path: path, operation: operation).description
        case .invalidName(let name, let reason):
            return "invalid cache name \"\(text(name))\": \(text(reason))"
        case .codecFailed(let operation, let reason):
            return "could not \(text(operation)) a value: \(text(reason))"
        case .notFound(let key):
            return "no cached value for key \(LoggedText.render(key, limit: LoggedText.keyLimit))"
        case .loadTimedOut(let key, let after):
            return
                "loading key \(LoggedText.render(key, limit: LoggedText.keyLimit)) took longer than \(after); "
                + "the load goes on in the background"
        case .lmdb(let code, let operation, let message):
            return StorageError.lmdb(code: code, operation: operation, message: message).description
        }
    }
}
