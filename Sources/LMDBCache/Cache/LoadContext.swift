import LMDBCacheStorage

/// What a loader may say about the value it loads: its lifetime, its memory cost, or that it
/// must not be cached (FusionCache's adaptive caching).
///
/// A loader that takes one sets it before returning:
///
/// ```swift
/// let token = try await cache.value(forKey: "token") { context in
///     let t = try await auth.token()
///     context.expiresAfter = t.lifetime
///     context.isCacheable = t.isValid
///     return t
/// }
/// ```
///
/// It starts with the call's `expiresAfter` and `cost`. Concurrent callers of one key share one
/// load, and so the context of the caller that started it. Safe to use from any thread.
public final class LoadContext: Sendable {
    private struct State {
        var expiresAfter: Duration?
        var cost: Int?
        var isCacheable = true
        var tags: Set<String> = []
    }

    private let state: Locked<State>

    init(expiresAfter: Duration?, cost: Int?) {
        state = Locked(State(expiresAfter: expiresAfter, cost: cost))
    }

    /// The loaded value's time to live in both tiers; nil: it does not expire.
    public var expiresAfter: Duration? {
        get { state.withLock { $0.expiresAfter } }
        set { state.withLock { $0.expiresAfter = newValue } }
    }

    /// The loaded value's cost in the memory tier; nil: the weigher's, else its encoded size.
    public var cost: Int? {
        get { state.withLock { $0.cost } }
        set { state.withLock { $0.cost = newValue } }
    }

    /// The tags the loaded value is stored with (``Cache/insert(_:forKey:cost:expiresAfter:tags:)``);
    /// empty by default. An invalid tag stores nothing (the callers still get the value, and a value
    /// cached before stays) and is reported by ``Cache/flush()``.
    public var tags: Set<String> {
        get { state.withLock { $0.tags } }
        set { state.withLock { $0.tags = newValue } }
    }

    /// False: every caller waiting gets the value, and nothing is stored (any value already
    /// cached for the key stays). True by default.
    public var isCacheable: Bool {
        get { state.withLock { $0.isCacheable } }
        set { state.withLock { $0.isCacheable = newValue } }
    }
}
