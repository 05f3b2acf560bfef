import Logging

extension Logger {
    /// A logger labelled `LMDBCache` that drops every message: the default of every API that takes
    /// a logger, so the library logs nothing unless given one. A new logger each time, never a
    /// global one.
    @usableFromInline
    package static var lmdbCacheDefault: Logger {
        Logger(label: "LMDBCache", factory: { _ in SwiftLogNoOpLogHandler() })
    }
}
