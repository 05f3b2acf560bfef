import LMDBCacheStorage
import Synchronization

/// A flag that goes from false to true once.
final class LockedFlag: Sendable {
    private let storage = Atomic<Bool>(false)

    var value: Bool { storage.load(ordering: .acquiring) }

    /// Sets the flag; true when this call set it.
    func set() -> Bool {
        !storage.exchange(true, ordering: .acquiringAndReleasing)
    }
}
