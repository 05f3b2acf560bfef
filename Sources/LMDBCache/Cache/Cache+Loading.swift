/// Where ``Cache/value(forKey:policy:cost:expiresAfter:load:)`` looks for a value, as
/// NSURLCache's request cache policies do.
public enum LoadPolicy: Sendable, Hashable {
    /// A cached value if there is one, else the loader's (stored in the cache). The default.
    case useCacheElseLoad
    /// The loader's value, stored in the cache, whatever the cache holds. Joins a load for the
    /// same key that is already under way.
    case reloadIgnoringCache
    /// A cached value only; the loader never runs. A miss throws ``CacheError/notFound(key:)``.
    case cacheOnly
}

extension Cache {
    /// The value for `key`, running `load` on a miss and storing its result.
    ///
    /// Concurrent misses for one key run `load` once; every caller waiting gets its value, or
    /// its error. Errors are not cached: the next call runs `load` again. `load` runs in a task of
    /// its own, so cancelling one caller ends that caller's wait with `CancellationError` and
    /// fails no one else.
    ///
    /// ```swift
    /// let fresh = try await cache.value(forKey: "a3") { try await api.article(id: "a3") }
    /// ```
    ///
    /// - Parameters:
    ///   - key: the key to look up, and to store the loaded value under.
    ///   - policy: whether to use the cache, the loader, or both. Default ``LoadPolicy/useCacheElseLoad``.
    ///   - cost: the memory tier's cost of a loaded value, as in ``insert(_:forKey:cost:expiresAfter:)``.
    ///   - expiresAfter: the loaded value's time to live.
    ///   - load: produces the value on a miss; runs once for all concurrent callers of the key.
    /// - Throws: `load`'s error, `CancellationError` when the caller is cancelled while waiting,
    ///   ``CacheError/notFound(key:)`` for a ``LoadPolicy/cacheOnly`` miss, ``CacheError/closed``.
    public func value(
        forKey key: Key, policy: LoadPolicy = .useCacheElseLoad, cost: Int? = nil, expiresAfter: Duration? = nil,
        load: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        if isClosedForLoading { throw CacheError.closed }
        if policy != .reloadIgnoringCache, let value = value(forKey: key) { return value }
        if policy == .cacheOnly { throw CacheError.notFound(key: "\(key)") }
        return try await loads.value(forKey: key) { [self] in
            // A load that finished between this caller's miss and its joining leaves its value
            // in the cache: look once more rather than load twice. The caller's miss is counted
            // already, so this look is not.
            if policy == .useCacheElseLoad, let value = uncountedValue(forKey: key) { return .success(value) }
            countLoad()
            do {
                let value = try await load()
                insert(value, forKey: key, cost: cost, expiresAfter: expiresAfter)
                return .success(value)
            } catch {
                countLoadFailure(error)
                return .failure(error)
            }
        }
    }
}
