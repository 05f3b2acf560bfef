/// Where ``Cache/value(forKey:policy:cost:expiresAfter:freshness:load:)-(_,_,_,_,_,()->Value)``
/// looks for a value, as NSURLCache's request cache policies do.
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
    /// fails no one else, and a load a caller stopped waiting for still stores its result.
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
    ///   - freshness: refresh ahead, stale on failure, timeouts (``Freshness``); nil: the
    ///     configuration's ``Configuration/freshness``.
    ///   - load: produces the value on a miss; runs once for all concurrent callers of the key.
    /// - Throws: `load`'s error (unless a stale value is served instead), `CancellationError` when
    ///   the caller is cancelled while waiting, ``CacheError/loadTimedOut(key:after:)`` past the
    ///   hard timeout, ``CacheError/notFound(key:)`` for a ``LoadPolicy/cacheOnly`` miss,
    ///   ``CacheError/closed``.
    public func value(
        forKey key: Key, policy: LoadPolicy = .useCacheElseLoad, cost: Int? = nil, expiresAfter: Duration? = nil,
        freshness: Freshness? = nil, load: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        if let value = try hit(
            forKey: key, policy: policy, cost: cost, expiresAfter: expiresAfter, freshness: freshness,
            loader: .plain(load))
        {
            return value
        }
        return try await loadAndWait(
            forKey: key, policy: policy, cost: cost, expiresAfter: expiresAfter, freshness: freshness,
            loader: .plain(load))
    }

    /// ``value(forKey:policy:cost:expiresAfter:freshness:load:)-(_,_,_,_,_,()->Value)`` with a
    /// loader that may set its value's lifetime and cost, or keep it out of the cache, through a
    /// ``LoadContext``.
    ///
    /// ```swift
    /// let token = try await cache.value(forKey: "token") { context in
    ///     let t = try await auth.token()
    ///     context.expiresAfter = t.lifetime
    ///     context.isCacheable = t.isValid
    ///     return t
    /// }
    /// ```
    public func value(
        forKey key: Key, policy: LoadPolicy = .useCacheElseLoad, cost: Int? = nil, expiresAfter: Duration? = nil,
        freshness: Freshness? = nil, load: @escaping @Sendable (LoadContext) async throws -> Value
    ) async throws -> Value {
        if let value = try hit(
            forKey: key, policy: policy, cost: cost, expiresAfter: expiresAfter, freshness: freshness,
            loader: .withContext(load))
        {
            return value
        }
        return try await loadAndWait(
            forKey: key, policy: policy, cost: cost, expiresAfter: expiresAfter, freshness: freshness,
            loader: .withContext(load))
    }

    /// A loader as the caller gave it: wrapping one kind in the other would allocate a closure on
    /// every call, hits included.
    enum Loader: Sendable {
        case plain(@Sendable () async throws -> Value)
        case withContext(@Sendable (LoadContext) async throws -> Value)

        func load(_ context: LoadContext) async throws -> Value {
            switch self {
            case .plain(let load): return try await load()
            case .withContext(let load): return try await load(context)
            }
        }
    }

    /// The synchronous half of both get-or-loads: a live value (starting its refresh if one is
    /// due), or nil to load. Counts the lookup. Not `async`, and the async callers keep little
    /// across it, so a hit takes nothing from the task's allocator (a deeper async chain made
    /// hits allocate).
    func hit(
        forKey key: Key, policy: LoadPolicy, cost: Int?, expiresAfter: Duration?, freshness: Freshness?,
        loader load: Loader
    ) throws -> Value? {
        if isClosedForLoading { throw CacheError.closed }
        if policy != .reloadIgnoringCache, let found = entryForLoad(forKey: key), !found.isStale {
            let freshness = freshness ?? configuration.freshness
            if policy == .useCacheElseLoad, let refreshAfter = freshness.refreshAfter,
                isDue(stored: found.stored, after: refreshAfter)
            {
                refresh(
                    key,
                    LoadRequest(cost: cost, expiresAfter: expiresAfter, staleFor: freshness.staleIfError, load: load),
                    dueAfter: refreshAfter)
            }
            return found.value
        }
        if policy == .cacheOnly { throw CacheError.notFound(key: "\(key)") }
        return nil
    }

    /// The asynchronous half: joins or starts the key's load and waits for it, serving a value
    /// past its expiry (kept for ``Freshness/staleIfError``) if the loader fails or is slow.
    func loadAndWait(
        forKey key: Key, policy: LoadPolicy, cost: Int?, expiresAfter: Duration?, freshness: Freshness?,
        loader load: Loader
    ) async throws -> Value {
        let freshness = freshness ?? configuration.freshness
        let request = LoadRequest(
            cost: cost, expiresAfter: expiresAfter, staleFor: freshness.staleIfError, load: load,
            consultsRemote: policy != .reloadIgnoringCache, lease: freshness.lease)
        // The caller's lookup counted its miss; this second look, for a stale value, is not.
        let found =
            policy == .reloadIgnoringCache || freshness.staleIfError == nil
            ? nil : entryForLoad(forKey: key, counting: false)
        let stale = found?.isStale == true ? found : nil
        return try await wait(forKey: key, stale: stale, freshness: freshness) { [self] flight in
            // A load that finished between this caller's miss and its joining leaves its value
            // in the cache: look once more rather than load twice. The caller's miss is counted
            // already, so this look is not.
            if policy == .useCacheElseLoad, let value = uncountedValue(forKey: key) { return .success(value) }
            return await run(request, forKey: key, flight: flight).result
        }
    }

    /// What one load stores, and how.
    struct LoadRequest: Sendable {
        var cost: Int?
        var expiresAfter: Duration?
        /// ``Freshness/staleIfError`` of the call that started the load.
        var staleFor: Duration?
        var load: Loader
        /// Whether the remote tier is asked before the loader runs (not by a reload, nor a refresh).
        var consultsRemote = false
        /// The load lease to take in the remote tier before the loader runs (``Freshness/lease``).
        var lease: LoadLease?
    }

    /// The entry a get-or-load finds: live from memory, else from disk; else a stale one (past
    /// its expiry, kept for ``Freshness/staleIfError``), from memory before disk. Counted as a
    /// lookup (a stale entry is a miss).
    func entryForLoad(forKey key: Key, counting: Bool = true) -> StoredValue<Value>? {
        let (entry, generation) = memory.lookUpEntry(key, counting: counting)
        if let entry, !entry.isStale { return entry }
        // Memory missed, or holds only a stale copy: the disk may hold a live value (written by
        // another process, or evicted from memory).
        let found = diskEntry(forKey: key, generation: generation, counting: counting, includingStale: entry == nil)
        return found ?? entry
    }

    /// True when a value stored at `stored` is at least `after` old (a clock that went back is
    /// no time passing).
    func isDue(stored: UInt64, after: Duration) -> Bool {
        let now = memory.now
        return now > stored && now - stored >= after.milliseconds
    }

    /// Starts a background reload of `key`, found stored at least `dueAfter` ago, unless a load
    /// for it is under way. Counted as a refresh when it stores a value, as a failed one when the
    /// loader throws (a value it may not store, or a write to the key since it started, count as
    /// neither).
    ///
    /// The reload looks again once it runs, as a first load does: a caller whose lookup came
    /// before another refresh stored may start this one after it, and a value no longer due
    /// (or one written since) is not reloaded again.
    func refresh(_ key: Key, _ request: LoadRequest, dueAfter: Duration) {
        loads.start(forKey: key) { [self] flight in
            if isClosedForLoading { return .failure(CacheError.closed) }  // not a failed refresh
            if let found = entryForLoad(forKey: key, counting: false), !found.isStale,
                !isDue(stored: found.stored, after: dueAfter)
            {
                return .success(found.value)
            }
            let (result, stored) = await run(request, forKey: key, flight: flight)
            switch result {
            case .success: if stored { countRefresh(succeeded: true) }
            case .failure: countRefresh(succeeded: false)
            }
            return result
        }
    }

    /// Runs the loader once, storing its value as its context says unless the key was written or
    /// removed since the load began (run `flight`). Returns the loader's result and whether it
    /// was stored.
    func run(
        _ request: LoadRequest, forKey key: Key, flight: UInt64
    ) async -> (result: Result<Value, any Error>, stored: Bool) {
        if isClosedForLoading { return (.failure(CacheError.closed), false) }
        noteStart(key, flight: flight)
        // The remote tier versions the loaded value by this (``RemoteStore/loadStamp()``): a
        // write or removal made while the loader ran, here or on another machine, is newer.
        let stamp = remote?.loadStamp()
        var lease: [UInt8]?
        // Whether Redis was found without a record for the key: the loaded value then goes there
        // only if none arrived meanwhile (a record that was there, expired or unusable, is replaced).
        var remoteMissedAt: UInt64?
        if request.consultsRemote, let remote {
            let bytes = key.cacheKeyBytes
            // One command timeout for every exchange with the remote tier below, in all.
            let budget = RemoteBudget(remote.commandTimeout)
            let lookedAt = CacheChange.wallClockNow()
            let record = await remote.record(forKey: bytes, budget: budget)
            if let found = remoteValue(record, forKey: key, cost: request.cost, flight: flight) { return found }
            if record == nil { remoteMissedAt = lookedAt }
            if let options = request.lease {
                switch await remote.lease(forKey: bytes, holdFor: options.holdFor, budget: budget) {
                case .acquired(let token):
                    // The previous holder may have stored its value and let go between this
                    // cache's miss and its taking the lease: look once more before loading.
                    if let found = remoteValue(
                        await remote.record(forKey: bytes, budget: budget), forKey: key, cost: request.cost, flight: flight)
                    {
                        remote.release(token, forKey: bytes)
                        return found
                    }
                    lease = token
                case .heldElsewhere:
                    let record = await remote.waitForRecord(forKey: bytes, timeout: options.waitFor, budget: budget)
                    if let found = remoteValue(record, forKey: key, cost: request.cost, flight: flight) { return found }
                case .unavailable:
                    break
                }
            }
        }
        // Released after the value is stored: the store queues its remote write first.
        defer { if let lease { remote?.release(lease, forKey: key.cacheKeyBytes) } }
        countLoad()
        let context = LoadContext(expiresAfter: request.expiresAfter, cost: request.cost)
        do {
            let value = try await request.load.load(context)
            // After a remote miss, Redis gets the value only if no other machine stored one since:
            // a newer write made elsewhere is not replaced by this load's older value.
            let stored =
                context.isCacheable
                && store(
                    value, forKey: key, cost: context.cost, expiresAfter: context.expiresAfter,
                    staleFor: request.staleFor, tags: context.tags, flight: flight,
                    remoteAbsentSince: remoteMissedAt, loadStamp: stamp)
            return (.success(value), stored)
        } catch {
            countLoadFailure(error)
            return (.failure(error), false)
        }
    }

    /// The value of a record the remote tier returned for `key`, stored in both local tiers with
    /// its remaining lifetime and tags (unless the key was written or removed here since the load
    /// started, or the record expired); nil when there is no record, or it cannot be used (damaged,
    /// another key's, not decodable: then the loader runs).
    func remoteValue(
        _ record: [UInt8]?, forKey key: Key, cost: Int?, flight: UInt64
    ) -> (result: Result<Value, any Error>, stored: Bool)? {
        guard let record, let disk else { return nil }
        guard let decoded = RemoteRecord.decode(record, forKey: key.cacheKeyBytes),
            let value = try? codec.decode(decoded.value)
        else {
            remote?.discardDamaged(forKey: key.cacheKeyBytes)
            return nil
        }
        let now = disk.configuration.clock.milliseconds
        guard decoded.expires == 0 || decoded.expires > now else { return nil }
        // The record's own lifetime, as the machine that wrote it set it (checked by the decoder:
        // a stale window ends after a nonzero expiry).
        let stored = store(
            value, forKey: key, cost: cost, expiresAfter: nil, staleFor: nil,
            tags: Set(decoded.tags.tags), flight: flight, toRemote: false,
            lifetime: Lifetime(expires: decoded.expires, staleUntil: decoded.staleUntil))
        return (.success(value), stored)
    }

    /// What to serve for `key` in place of a failed or slow load that found `stale` (a value past
    /// its expiry): what the cache holds now, looked up again without counting. A live value (a
    /// write since) is served as it is; a stale one while its window lasts, counted as served for
    /// `reason`; nothing once the key was removed or its window ended.
    func serve(_ stale: StoredValue<Value>?, forKey key: Key, _ reason: StaleReason) -> Value? {
        guard stale != nil, let now = entryForLoad(forKey: key, counting: false) else { return nil }
        if !now.isStale { return now.value }
        guard memory.now < now.staleUntil else { return nil }
        countStaleServed(reason)
        return now.value
    }

    /// The result of `key`'s load (joining one under way), with `stale` served when the loader
    /// throws or is slower than the timeouts allow. A caller whose wait ends without the result
    /// (a timeout, a cancellation) leaves the load, which goes on. With a hard timeout, a load
    /// under way for ``hungLoadBound(_:)`` is not joined: a new one starts, and the old one's
    /// result, should it come, is stored only if the new one has not stored first.
    func wait(
        forKey key: Key, stale: StoredValue<Value>?, freshness: Freshness,
        run: @escaping LoadCoalescer<Key, Value>.Run
    ) async throws -> Value {
        let soft = stale == nil ? nil : freshness.timeout?.forTimer
        let hard = freshness.hardTimeout?.forTimer
        do {
            if soft == nil && hard == nil { return try await loads.value(forKey: key, run: run) }
            // Joined (or started) here, not in the task that waits for it: a timer may end the
            // wait before that task runs, and the load must go on all the same, once.
            let (flight, result) = loads.join(forKey: key, replacingAfter: hard.map(Self.hungLoadBound), run: run)
            defer { loads.leave(key, flight: flight, promise: result) }
            let clock = configuration.timeoutClock
            return try await withThrowingTaskGroup(of: LoadOutcome.self) { group in
                group.addTask { .loaded(try await result.value().get()) }
                if let soft {
                    group.addTask {
                        try await clock.sleep(for: soft)
                        return .softTimeout
                    }
                }
                if let hard {
                    group.addTask {
                        try await clock.sleep(for: hard)
                        return .hardTimeout
                    }
                }
                defer { group.cancelAll() }
                while let outcome = try await group.next() {
                    switch outcome {
                    case .loaded(let value):
                        return value
                    case .softTimeout:
                        // Nothing to serve after all (the window ended, the key was removed):
                        // wait on, for the load or the hard timeout.
                        if let value = serve(stale, forKey: key, .timeout) { return value }
                    case .hardTimeout:
                        if let value = serve(stale, forKey: key, .timeout) { return value }
                        countLoadTimeout()
                        throw CacheError.loadTimedOut(key: "\(key)", after: hard ?? .zero)
                    }
                }
                throw CancellationError()
            }
        } catch {
            // The loader failed; a caller that was cancelled gets its cancellation, not a value.
            if case CacheError.loadTimedOut = error { throw error }
            guard !Task.isCancelled, let value = serve(stale, forKey: key, .error) else { throw error }
            return value
        }
    }

    /// How long a load may run before a caller with hard timeout `hard` starts a new one instead
    /// of joining it: four hard timeouts, and at least a second (so a zero timeout still
    /// coalesces, and a key's loads start at most once a second).
    static func hungLoadBound(_ hard: Duration) -> Duration {
        max(hard * 4, .seconds(1))
    }

    /// Notes, before anything is read from a source, the tags of the entry run `flight` of `key`
    /// replaces: a tag removal from here on covers the load when the entry carries the tag. Under
    /// the key's write lock, so a write of the key is wholly before (its tags are the ones
    /// noted) or after (it supersedes the run).
    func noteStart(_ key: Key, flight: UInt64) {
        withWriteLock(for: key) { loads.noteStart(key, flight: flight, tags: currentTags(forKey: key)) }
    }

    /// The stored bytes of the tags `key`'s entry carries now (live or stale, memory or disk):
    /// what a load beginning now replaces.
    func currentTags(forKey key: Key) -> [[UInt8]] {
        if let tags = memory.tags(forKey: key) { return tags.bytes }
        guard let disk, !isClosedForLoading else { return [] }
        return (try? disk.entry(forKey: key.cacheKeyBytes, includingStale: true))?.tags.bytes ?? []
    }

    /// What ended one wait of a caller for a load.
    enum LoadOutcome: Sendable {
        case loaded(Value)
        case softTimeout
        case hardTimeout
    }
}
