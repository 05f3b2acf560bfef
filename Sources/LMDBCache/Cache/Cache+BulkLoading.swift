extension Cache {
    /// The values for `keys`: what either tier holds, and for the keys both tiers missed one call
    /// of `load` with exactly those keys (less any a load under way already covers: those join
    /// it). The loaded values are stored; keys `load` leaves out stay absent and are not cached.
    ///
    /// ```swift
    /// let articles: [String: Article] = try await cache.values(forKeys: ["a1", "a2", "a3"]) { missing in
    ///     try await api.articles(ids: missing)        // keys it leaves out stay absent
    /// }
    /// ```
    ///
    /// Freshness applies per key: a value due for ``Freshness/refreshAfter`` is returned and
    /// reloaded in the background (the due keys in one more call of `load`); a stale value
    /// (``Freshness/staleIfError``) is returned for its key when the load fails. The timeouts do
    /// not apply to bulk loads. Single-key loads of the same keys
    /// (``value(forKey:policy:cost:expiresAfter:freshness:load:)-(_,_,_,_,_,()->Value)``) join a
    /// bulk load under way, and the other way round; a single-key caller whose key the bulk loader
    /// left out gets ``CacheError/notFound(key:)``. `load` runs in a task of its own: a cancelled
    /// caller stops waiting, and the load goes on for the others and is stored.
    ///
    /// - Parameters:
    ///   - keys: the keys wanted; duplicates count once.
    ///   - expiresAfter: the loaded values' time to live.
    ///   - freshness: nil: the configuration's ``Configuration/freshness``.
    ///   - tags: the tags every loaded value is stored with (a refresh stores them again: a
    ///     refreshed entry carries the tags of the call that refreshed it). Invalid ones store
    ///     nothing, and ``flush()`` throws ``CacheError/invalidTag(reason:)``.
    ///   - load: returns values for the keys it is given.
    /// - Returns: a value for every key either tier or the loader had.
    /// - Throws: `load`'s error when it fails for a key that has no stale value to serve,
    ///   `CancellationError` when the caller is cancelled, ``CacheError/closed``.
    public func values(
        forKeys keys: some Sequence<Key>, expiresAfter: Duration? = nil, freshness: Freshness? = nil,
        tags: Set<String> = [], load: @escaping @Sendable ([Key]) async throws -> [Key: Value]
    ) async throws -> [Key: Value] {
        if isClosedForLoading { throw CacheError.closed }
        let freshness = freshness ?? configuration.freshness
        let request = BulkRequest(
            expiresAfter: expiresAfter, staleFor: freshness.staleIfError, tags: tags, load: load)
        var values: [Key: Value] = [:]
        var stale: [Key: StoredValue<Value>] = [:]
        var pending: [Key] = []
        var due: [Key] = []
        var seen = Set<Key>()
        for key in keys where seen.insert(key).inserted {
            if let found = entryForLoad(forKey: key) {
                if !found.isStale {
                    values[key] = found.value
                    if let refreshAfter = freshness.refreshAfter, isDue(stored: found.stored, after: refreshAfter) {
                        due.append(key)
                    }
                    continue
                }
                if freshness.staleIfError != nil { stale[key] = found }
            }
            pending.append(key)
        }
        if !due.isEmpty { _ = startBulk(request, forKeys: due, refresh: true) }
        guard !pending.isEmpty else { return values }

        let started = startBulk(request, forKeys: pending, refresh: false)
        var results = try await started?.results.value() ?? [:]
        let claimed = Set(started?.claimed ?? [])
        for key in pending where !claimed.contains(key) {
            // A load under way covers it: join it (or, if it has just finished, look again).
            do {
                results[key] = .success(
                    try await loads.value(forKey: key) { [self] in
                        if let value = uncountedValue(forKey: key) { return .success(value) }
                        return await runBulk(request, forKeys: [key], refresh: false)[key]
                            ?? .failure(CacheError.notFound(key: "\(key)"))
                    })
            } catch {
                if Task.isCancelled { throw error }
                results[key] = .failure(error)
            }
        }
        var failure: (any Error)?
        var servedStale: [Key] = []
        let now = memory.now
        for key in pending {
            switch results[key] {
            case .success(let value):
                values[key] = value
            case .failure(let error):
                if case CacheError.notFound = error { continue }  // left out by the loader: absent
                // What the cache holds now: a removal since means nothing to serve, a write
                // means that value, a value still stale is served while its window lasts.
                if stale[key] != nil, let current = entryForLoad(forKey: key, counting: false),
                    !current.isStale || now < current.staleUntil
                {
                    values[key] = current.value
                    if current.isStale { servedStale.append(key) }
                } else if failure == nil {
                    failure = error
                }
            case nil:
                continue
            }
        }
        if let failure { throw failure }
        for _ in servedStale { countStaleServed(.error) }
        return values
    }

    /// What one bulk load stores, and how.
    struct BulkRequest: Sendable {
        var expiresAfter: Duration?
        var staleFor: Duration?
        var tags: Set<String> = []
        var load: @Sendable ([Key]) async throws -> [Key: Value]
    }

    /// Starts one bulk load for those of `keys` no load is under way for.
    func startBulk(
        _ request: BulkRequest, forKeys keys: [Key], refresh: Bool
    ) -> (claimed: [Key], results: LoadPromise<[Key: Result<Value, any Error>]>)? {
        loads.startBulk(forKeys: keys, missing: { CacheError.notFound(key: "\($0)") }) { [self] claimed in
            await runBulk(request, forKeys: claimed, refresh: refresh)
        }
    }

    /// Calls the bulk loader once with `keys` and stores what it returns; the result per key
    /// (keys it left out are absent).
    func runBulk(_ request: BulkRequest, forKeys keys: [Key], refresh: Bool) async -> [Key: Result<Value, any Error>] {
        countLoad()
        countBulkLoad(keys: keys.count)
        do {
            let loaded = try await request.load(keys)
            var results: [Key: Result<Value, any Error>] = [:]
            for key in keys {
                if let value = loaded[key] {
                    let stored = store(
                        value, forKey: key, cost: nil, expiresAfter: request.expiresAfter,
                        staleFor: request.staleFor, tags: request.tags, fromLoad: true)
                    results[key] = .success(value)
                    if refresh && stored { countRefresh(succeeded: true) }
                } else if refresh {
                    // A key left out keeps its old value when refreshing: that refresh failed.
                    countRefresh(succeeded: false)
                }
            }
            return results
        } catch {
            countLoadFailure(error)
            if refresh { for _ in keys { countRefresh(succeeded: false) } }
            return Dictionary(uniqueKeysWithValues: keys.map { ($0, .failure(error)) })
        }
    }
}
