import Synchronization

/// The disk tier's change log as a ``ChangeFeed``: processes (and caches) that share a directory
/// hear of each other's changes through the store itself.
///
/// A change is logged by the transaction that makes it (DiskStore+ChangeLog.swift), so it can be
/// neither lost nor reordered relative to the change, and ``publish(_:)`` has nothing to do.
/// ``receive()`` reads the log's newest sequence number in a pooled read transaction (about a
/// microsecond when nothing changed) and the entries past the follower's position.
final class DiskChangeLog: ChangeFeed {
    private let disk: DiskCache
    /// The sequence number of the newest change delivered.
    private let position: Mutex<UInt64>
    /// Most changes one ``receive()`` reads; the follower calls again until it has them all.
    static let readLimit = 4_096

    /// Follows the log of `disk` from its newest change on: earlier ones concern values no
    /// memory tier of this cache can hold yet.
    init(disk: DiskCache) throws {
        self.disk = disk
        position = Mutex(try disk.withStore { try $0.changeHead() })
    }

    func publish(_ change: CacheChange) {}

    func receive() throws -> ChangeDelivery {
        try position.withLock { position in
            switch try disk.withStore({ try $0.changes(after: position, limit: Self.readLimit) }) {
            case .changes(let changes, let head):
                position = head
                return .changes(changes)
            case .fellBehind(let head):
                position = head
                return .missed
            }
        }
    }
}
