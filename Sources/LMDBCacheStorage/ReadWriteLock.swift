import Glibc

/// A writer-preferring read-write lock (pthread), so a steady stream of shared holders cannot
/// starve an exclusive one.
///
/// Used where many short operations may run together but one rare operation must run alone:
/// transactions against a map resize, and cache calls against `close()`.
// Inlinable, and the type @usableFromInline so that it is (Repository.md): cache calls in
// LMDBCache take it on every operation.
@usableFromInline package final class ReadWriteLock: @unchecked Sendable {
    @usableFromInline let lock: UnsafeMutablePointer<pthread_rwlock_t>

    package init() {
        lock = .allocate(capacity: 1)
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP))
        pthread_rwlock_init(lock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    @inlinable
    package func lockShared() { pthread_rwlock_rdlock(lock) }
    @inlinable
    package func unlockShared() { pthread_rwlock_unlock(lock) }

    @inlinable
    package func withSharedLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    @inlinable
    package func withExclusiveLock<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}
