import Glibc
import LMDBCacheStorage

/// Striped locks by key hash that make a two-tier write (queue it on disk, then store it in
/// memory) one step per key: two writers of one key finish in the same order in both tiers, so
/// memory and disk never end up holding different values.
///
/// Striped rather than one lock per key so memory stays fixed; writers of keys that share a
/// stripe wait for each other, which costs little with many stripes. Reads never take them.
/// pthread mutexes, as ``Locked``, so ThreadSanitizer sees them.
final class KeyWriteLocks: @unchecked Sendable {
    /// A power of two: the stripe is the hash's low bits.
    static let stripeCount = 64

    private let mutexes: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutexes = .allocate(capacity: Self.stripeCount)
        for stripe in 0..<Self.stripeCount { pthread_mutex_init(mutexes + stripe, nil) }
    }

    deinit {
        for stripe in 0..<Self.stripeCount { pthread_mutex_destroy(mutexes + stripe) }
        mutexes.deallocate()
    }

    /// Runs `body` holding the stripe of `key`. `body` must not call user code (listeners,
    /// codecs): one that writes a key of the same stripe would wait for itself.
    func withLock<Key: Hashable, T>(for key: Key, _ body: () throws -> T) rethrows -> T {
        let mutex = mutexes + (key.hashValue & (Self.stripeCount - 1))
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Runs `body` holding every stripe (taken in order, so two callers cannot deadlock).
    func withAllLocks<T>(_ body: () throws -> T) rethrows -> T {
        for stripe in 0..<Self.stripeCount { pthread_mutex_lock(mutexes + stripe) }
        defer { for stripe in (0..<Self.stripeCount).reversed() { pthread_mutex_unlock(mutexes + stripe) } }
        return try body()
    }
}
