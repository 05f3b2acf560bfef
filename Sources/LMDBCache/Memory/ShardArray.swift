import Glibc

/// The shards of a ``MemoryCache``, each a pthread mutex and an ``MemoryShard`` side by side in one
/// allocation, every shard on cache lines of its own.
///
/// A value type over raw memory so that reaching a shard costs no reference counting: an array of
/// lock objects made every operation retain and release the shard's object, an atomic write to a
/// cache line the other threads also write. pthread mutexes rather than `Synchronization.Mutex`
/// because ThreadSanitizer cannot see Mutex's futex on Linux and would report every access under
/// it as a race. The owner calls ``deallocate()`` once, in its `deinit`.
@usableFromInline
struct ShardArray<Key: Hashable, Value>: @unchecked Sendable {
    @usableFromInline let base: UnsafeMutableRawPointer
    @usableFromInline let count: Int
    /// Bytes from one shard to the next: a multiple of 128, so neighbours never share the pair of
    /// cache lines the CPU fetches together.
    @usableFromInline let stride: Int

    /// Where a slot's shard starts, after its mutex.
    @usableFromInline static var shardOffset: Int { 64 }

    init(_ shards: [MemoryShard<Key, Value>]) {
        precondition(MemoryLayout<pthread_mutex_t>.size <= Self.shardOffset)
        count = shards.count
        stride = (Self.shardOffset + MemoryLayout<MemoryShard<Key, Value>>.size + 127) / 128 * 128
        base = .allocate(byteCount: stride * count, alignment: 128)
        // Adaptive: a thread that finds the lock taken spins briefly before sleeping. Critical
        // sections here last tens of nanoseconds, and a futex sleep and wake-up costs
        // microseconds: with plain mutexes two threads on 16 shards ran no faster than one.
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        defer { pthread_mutexattr_destroy(&attributes) }
        for (index, shard) in shards.enumerated() {
            let slot = base + index * stride
            pthread_mutex_init(slot.bindMemory(to: pthread_mutex_t.self, capacity: 1), &attributes)
            (slot + Self.shardOffset).bindMemory(to: MemoryShard<Key, Value>.self, capacity: 1).initialize(to: shard)
        }
    }

    /// Destroys the shards and frees their memory; no call may follow.
    func deallocate() {
        for index in 0..<count {
            let slot = base + index * stride
            pthread_mutex_destroy(slot.assumingMemoryBound(to: pthread_mutex_t.self))
            _ = (slot + Self.shardOffset).assumingMemoryBound(to: MemoryShard<Key, Value>.self).deinitialize(count: 1)
        }
        base.deallocate()
    }

    /// Runs `body` on shard `index` while holding its lock.
    @inlinable @inline(__always)
    func withLock<T>(at index: Int, _ body: (inout MemoryShard<Key, Value>) throws -> T) rethrows -> T {
        let slot = base + index &* stride
        let mutex = slot.assumingMemoryBound(to: pthread_mutex_t.self)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&(slot + Self.shardOffset).assumingMemoryBound(to: MemoryShard<Key, Value>.self).pointee)
    }
}
