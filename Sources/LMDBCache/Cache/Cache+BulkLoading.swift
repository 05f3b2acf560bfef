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
            expiresAfter: expiresAfter, staleFor: freshness.staleIfError, refreshAfter: freshness.refreshAfter,
            tags: tags, load: load)
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

        // The keys no load covers go to one call of the loader; the others join the load under
        // way for them, in the same step, and get its outcome (a value, an error, left out).
        let started = startBulk(request, forKeys: pending, refresh: false)
        defer {
            for (key, joined) in started.joined { loads.leave(key, flight: joined.flight, promise: joined.promise) }
        }
        var results = try await started.claimed?.results.value() ?? [:]
        for (key, joined) in started.joined { results[key] = try await joined.promise.value() }
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
        /// ``Freshness/refreshAfter``: a refresh reloads only the keys still due when it runs.
        var refreshAfter: Duration?
        var tags: Set<String> = []
        var load: @Sendable ([Key]) async throws -> [Key: Value]
    }

    /// Starts one bulk load for those of `keys` no load is under way for, and (unless it is a
    /// refresh, which no one waits for) joins the loads under way for the others.
    func startBulk(
        _ request: BulkRequest, forKeys keys: [Key], refresh: Bool
    ) -> LoadCoalescer<Key, Value>.BulkStart {
        loads.startBulk(forKeys: keys, joining: !refresh, missing: { CacheError.notFound(key: "\($0)") }) {
            [self] flight, claimed in
            await runBulk(request, forKeys: claimed, refresh: refresh, flight: flight)
        }
    }

    /// Calls the bulk loader once with `keys` and stores what it returns; the result per key
    /// (keys it left out are absent). A refresh first looks again, as ``refresh(_:_:dueAfter:)``
    /// does: keys no longer due (refreshed or written since) keep their value and are not loaded.
    func runBulk(
        _ request: BulkRequest, forKeys claimed: [Key], refresh: Bool, flight: UInt64
    ) async -> [Key: Result<Value, any Error>] {
        if isClosedForLoading {
            return Dictionary(uniqueKeysWithValues: claimed.map { ($0, .failure(CacheError.closed)) })
        }
        var results: [Key: Result<Value, any Error>] = [:]
        var keys: [Key] = []
        for key in claimed {
            if refresh, let refreshAfter = request.refreshAfter, let found = entryForLoad(forKey: key, counting: false),
                !found.isStale, !isDue(stored: found.stored, after: refreshAfter)
            {
                results[key] = .success(found.value)
                continue
            }
            // A load that finished between the caller's miss and this claim left its value: look
            // once more, uncounted, rather than load the key twice.
            if !refresh, let value = uncountedValue(forKey: key) {
                results[key] = .success(value)
                continue
            }
            noteStart(key, flight: flight)
            keys.append(key)
        }
        guard !keys.isEmpty else { return results }
        // The remote tier versions the loaded values by this, as a single load's.
        let stamp = remote?.loadStamp()
        // Another machine's values first (a refresh goes straight to the loader, as a single one
        // does): one exchange for every key, under one command timeout.
        var remoteMisses: (keys: Set<Key>, since: UInt64)?
        if !refresh, let remote {
            let budget = RemoteBudget(remote.commandTimeout)
            let lookedAt = CacheChange.wallClockNow()
            let records = await remote.records(forKeys: keys.map(\.cacheKeyBytes), budget: budget)
            var remaining: [Key] = []
            var missing: Set<Key> = []
            for (key, record) in zip(keys, records) {
                if let found = remoteValue(record, forKey: key, cost: nil, flight: flight),
                    case .success(let value) = found.result
                {
                    results[key] = .success(value)
                    continue
                }
                remaining.append(key)
                if record == nil { missing.insert(key) }
            }
            keys = remaining
            remoteMisses = (missing, lookedAt)
            guard !keys.isEmpty else { return results }
        }
        countLoad()
        countBulkLoad(keys: keys.count)
        do {
            let loaded = try await request.load(keys)
            for key in keys {
                if let value = loaded[key] {
                    // After a remote miss, Redis gets the value only if no other machine stored
                    // one (or removed the key) since: as a single load's value.
                    let absentSince = remoteMisses.flatMap { $0.keys.contains(key) ? $0.since : nil }
                    let stored = store(
                        value, forKey: key, cost: nil, expiresAfter: request.expiresAfter,
                        staleFor: request.staleFor, tags: request.tags, flight: flight,
                        remoteAbsentSince: absentSince, loadStamp: stamp)
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
            for key in keys { results[key] = .failure(error) }
            return results
        }
    }
}
