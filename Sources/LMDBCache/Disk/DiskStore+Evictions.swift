import Foundation
import Metrics

// Eviction events: observers of what trimming removes, told on a queue of their own, and the
// eviction metrics.
extension DiskStore {
    /// Receives batches of evicted entries, in eviction order, on a queue of its own (never the
    /// writer thread, so it may call back into the cache).
    typealias EvictionObserver = @Sendable ([DiskEviction]) -> Void

    /// Starts telling `observer` of evictions; returns the token that stops it.
    func observeEvictions(_ observer: @escaping EvictionObserver) -> UInt64 {
        evictionObservers.withLock { state in
            state.next += 1
            state.observers[state.next] = observer
            return state.next
        }
    }

    func stopObservingEvictions(_ token: UInt64) {
        _ = evictionObservers.withLock { $0.observers.removeValue(forKey: token) }
    }

    var isObserved: Bool {
        evictionObservers.withLock { !$0.observers.isEmpty }
    }

    func publish(_ evictions: [DiskEviction]) {
        guard !evictions.isEmpty else { return }
        let observers = evictionObservers.withLock { Array($0.observers.values) }
        guard !observers.isEmpty else { return }
        evictionQueue.async {
            for observer in observers { observer(evictions) }
        }
    }

    static func makeEvictionQueue() -> DispatchQueue {
        let queue = DispatchQueue(label: "LMDBCache.DiskStore.evictions")
        queue.setSpecific(key: evictionQueueKey, value: ObjectIdentifier(queue))
        return queue
    }

    /// Waits until every eviction event published so far has been delivered. On the eviction
    /// queue itself (an observer closing its cache) it returns at once: the events before the
    /// running one are delivered, and waiting for the queue there would wait for itself.
    func waitForEvictionEvents() {
        if DispatchQueue.getSpecific(key: Self.evictionQueueKey) == ObjectIdentifier(evictionQueue) { return }
        evictionQueue.sync {}
    }
}

/// An entry trimming removed from the disk tier.
struct DiskEviction: Sendable {
    /// The key as the user gave it (the full key of a long key).
    var key: [UInt8]
    var reason: RemovalReason
    /// The bytes it occupied (stored key and record).
    var bytes: Int
}

/// Entries and bytes one trim transaction evicted, by reason, for the metrics.
struct EvictionTally {
    private var entries = [Int](repeating: 0, count: RemovalReason.allCases.count)
    private var bytes = [Int](repeating: 0, count: RemovalReason.allCases.count)

    mutating func add(_ eviction: DiskEviction) {
        entries[eviction.reason.index] += 1
        bytes[eviction.reason.index] += eviction.bytes
    }

    func report(to metrics: DiskEvictionMetrics) {
        for reason in RemovalReason.allCases where entries[reason.index] > 0 {
            metrics.entries[reason.index].increment(by: entries[reason.index])
            metrics.bytes[reason.index].increment(by: bytes[reason.index])
        }
    }
}

/// `lmdbcache_disk_evictions_total{reason}` and `lmdbcache_disk_evicted_bytes_total{reason}`: what
/// trimming removed from a store, whichever handle or cache asked.
struct DiskEvictionMetrics: Sendable {
    let entries = RemovalReason.allCases.map {
        Counter(label: "lmdbcache_disk_evictions_total", dimensions: [("reason", $0.rawValue)])
    }
    let bytes = RemovalReason.allCases.map {
        Counter(label: "lmdbcache_disk_evicted_bytes_total", dimensions: [("reason", $0.rawValue)])
    }
}
