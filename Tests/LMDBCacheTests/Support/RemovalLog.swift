import LMDBCacheStorage

@testable import LMDBCache

/// Records what a removal listener hears.
final class RemovalLog<Key: Sendable, Value: Sendable>: Sendable {
    private let events = Locked<[CacheRemoval<Key, Value>]>([])

    var listener: @Sendable (CacheRemoval<Key, Value>) -> Void {
        { event in self.events.withLock { $0.append(event) } }
    }

    var all: [CacheRemoval<Key, Value>] { events.withLock { $0 } }

    /// (key, reason) pairs in the order heard.
    var reasons: [(Key, RemovalReason)] { all.map { ($0.key, $0.reason) } }

    func clear() { events.withLock { $0.removeAll() } }
}
