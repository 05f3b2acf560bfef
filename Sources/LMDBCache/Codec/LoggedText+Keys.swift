import LMDBCacheStorage
import Logging

extension LoggedText {
    /// A key as ``render(_:limit:)`` shows it: its description, at most ``keyLimit`` characters.
    package static func key(_ key: some CacheKey) -> String {
        if let string = key as? String { return render(string, limit: keyLimit) }
        return render(String(describing: key), limit: keyLimit)
    }
}

extension Logger.MetadataValue {
    /// `key` as ``LoggedText/key(_:)`` shows it: escaped and cut to ``LoggedText/keyLimit`` characters.
    package static func escaped(key: some CacheKey) -> Self {
        .string(LoggedText.key(key))
    }
}

extension CacheError: RenderedDescription {}
