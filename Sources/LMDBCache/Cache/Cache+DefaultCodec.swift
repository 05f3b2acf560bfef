import Foundation
import Logging

extension Cache.Configuration where Value: Codable {
    /// The configuration a cache of a value type with a built-in codec gets when none is given:
    /// default limits, and the codec its own `init()` overload picks: ``StringCodec`` for
    /// `String`, ``BytesCodec`` for `[UInt8]`, ``DataCodec`` for `Data`, ``JSONCodec`` for any
    /// other `Codable` type.
    public static var standard: Self {
        // Chosen at run time: in this generic context the constrained overloads of `init()` are
        // out of reach, and every one of these types is also Codable.
        if let codec = StringCodec() as? any ValueCodec<Value> { return Self(codec: codec) }
        if let codec = BytesCodec() as? any ValueCodec<Value> { return Self(codec: codec) }
        if let codec = DataCodec() as? any ValueCodec<Value> { return Self(codec: codec) }
        return Self(codec: JSONCodec<Value>())
    }
}

extension Cache where Value: Codable {
    /// Opens (creating when missing, owner-only) the cache in `directory` with
    /// ``Configuration/standard``: default limits and the value type's built-in codec.
    ///
    /// ```swift
    /// let articles = try Cache<String, Article>(directory: URL(filePath: "/var/cache/app/articles"))
    /// ```
    ///
    /// - Throws: what ``init(directory:configuration:logger:removalListener:)`` throws.
    public convenience init(
        directory: URL, logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) throws {
        try self.init(
            directory: directory, configuration: .standard, logger: logger, removalListener: removalListener)
    }

    /// Opens the cache called `name` in the user's cache directory (see
    /// ``init(name:configuration:logger:removalListener:)``) with ``Configuration/standard``.
    ///
    /// ```swift
    /// let articles = try Cache<String, Article>(name: "articles")
    /// ```
    ///
    /// - Throws: what ``init(name:configuration:logger:removalListener:)`` throws.
    public convenience init(
        name: String, logger: Logger = .lmdbCacheDefault,
        removalListener: RemovalListener? = nil
    ) throws {
        try self.init(name: name, configuration: .standard, logger: logger, removalListener: removalListener)
    }
}
