/// What the storage layer throws: the failures of LMDB, the store's files and its directory.
///
/// The library never lets one reach its callers: the disk tier turns each into the
/// `CacheError` case of the same name (`CacheError.init(_:)` in LMDBCache), the one place
/// errors cross from this layer to the one above.
@usableFromInline package enum StorageError: Error, Equatable, Sendable {
    /// The store was closed (its writer thread stopped) while a call waited for it.
    case closed
    /// An LMDB call refused a key or value, or a size it was given.
    case invalidKey(reason: String)
    /// The cache directory or one of its files cannot be created, opened or trusted.
    case directoryUnavailable(path: String, reason: String)
    /// The volume holding the store has no room for a write.
    case diskFull(path: String)
    /// The store's files are damaged.
    case damagedStore(path: String, reason: String)
    /// A limit of LMDB's (reader slots, map size, dirty pages) or of the system was reached.
    case resourceExhausted(resource: String, operation: String)
    /// Another process has the store open and the operation needs it alone.
    case storeInUse(path: String, operation: String)
    /// Any other LMDB return code.
    case lmdb(code: Int32, operation: String, message: String)
}

extension StorageError: CustomStringConvertible {
    /// The message of the case, one line with its text escaped (`LoggedText`): Storage's own
    /// logs show it, and the library's `CacheError` shows it for the same case.
    @usableFromInline package var description: String {
        let text = { (text: String) in LoggedText.render(text) }
        switch self {
        case .closed:
            return "the cache is closed; open a new instance to use the directory again"
        case .invalidKey(let reason):
            return "invalid key: \(text(reason))"
        case .directoryUnavailable(let path, let reason):
            return "cannot use cache directory \(text(path)): \(text(reason))"
        case .diskFull(let path):
            return "no space left on the volume holding \(text(path))"
        case .damagedStore(let path, let reason):
            return "the store at \(text(path)) is damaged (\(text(reason)))"
        case .resourceExhausted(let resource, let operation):
            return "\(text(operation)) failed: \(text(resource))"
        case .storeInUse(let path, let operation):
            return
                "cannot \(text(operation)) the store at \(text(path)) while another process has it open; close it there first"
        case .lmdb(let code, let operation, let message):
            return "\(text(operation)) failed: \(text(message)) (LMDB code \(code))"
        }
    }
}
