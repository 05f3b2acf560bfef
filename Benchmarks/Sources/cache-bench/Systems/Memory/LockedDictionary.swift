import Synchronization

/// The floor: a `Dictionary` behind one `Synchronization.Mutex` (the same lock as
/// ``SingleLockLRU``), with no eviction and no recency bookkeeping. A cache that does more per
/// operation should not be expected to beat it on one thread.
final class LockedDictionary: MemorySystem {
    static let name = "LockedDictionary"
    static let summary = "Dictionary<String, [UInt8]> behind one Mutex, no eviction (the floor)"

    private let state = Mutex<[String: [UInt8]]>([:])

    init(capacity: Int) {
        state.withLock { $0.reserveCapacity(capacity) }
    }

    static func makeKey(_ key: String) -> String { key }

    func get(_ key: String) -> [UInt8]? {
        state.withLock { $0[key] }
    }

    func set(_ value: [UInt8], forKey key: String) {
        state.withLock { $0[key] = value }
    }

    var count: Int? { state.withLock { $0.count } }
}
