import Glibc

/// A value behind a pthread mutex.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer cannot see Mutex's futex on
/// Linux (Swift 6.3) and reports every access made under it as a race, which would bury real
/// races. An uncontended pthread mutex costs about the same.
///
/// `withLock` is inlined into its callers in other modules (the type is `@usableFromInline` for
/// that, Repository.md), and the value is not checked for exclusive access at run time: the mutex
/// already makes each access exclusive.
@usableFromInline package final class Locked<Value>: @unchecked Sendable {
    @exclusivity(unchecked) @usableFromInline var value: Value
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the value while holding the lock.
    @inlinable @inline(__always)
    package func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
