import Foundation
import Logging

extension Cache {
    /// Opens the cache called `name` in the user's cache directory: `$XDG_CACHE_HOME/name`
    /// when that variable holds an absolute path, else `$HOME/.cache/name` (the account's home
    /// directory when `HOME` is unset or empty).
    ///
    /// A relative path in either variable is never resolved against the working directory: a
    /// relative `XDG_CACHE_HOME` is ignored, as the XDG Base Directory specification says, and a
    /// relative `HOME`, which has nothing to fall back on, is refused.
    ///
    /// - Throws: ``CacheError/invalidName(name:reason:)`` for a name that is empty, `.` or `..`,
    ///   or contains `/` or a NUL; ``CacheError/directoryUnavailable(path:reason:)`` when the
    ///   directory would come from a `HOME` that is not an absolute path or does not exist; otherwise what
    ///   ``init(directory:configuration:logger:removalListener:)`` throws.
    public convenience init(
        name: String, configuration: Configuration,
        logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) throws {
        var configuration = configuration
        if configuration.name == nil { configuration.name = name }
        try self.init(
            directory: try CacheDirectory.named(name), configuration: configuration, logger: logger,
            removalListener: removalListener)
    }
}
