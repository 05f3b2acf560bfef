/// How a cache hears of the changes other caches sharing its data made, and tells them of its
/// own: the seam between ``Cache`` and a transport.
///
/// The first transport is the disk tier's change log (``DiskChangeLog``), which records each
/// change in the transaction that makes it. A transport across machines implements the same two
/// calls; ``Cache`` and its ``ChangeFollower`` stay as they are.
package protocol ChangeFeed: Sendable {
    /// Publishes `change`, just made by this cache. A transport that records changes with the
    /// write itself (the disk tier's log) has nothing to do.
    func publish(_ change: CacheChange)

    /// The changes published since the previous call, oldest first, this cache's own included
    /// (the follower skips them by ``CacheChange/origin``); or that some were missed.
    func receive() throws -> ChangeDelivery
}

/// What a ``ChangeFeed`` delivers.
package enum ChangeDelivery: Sendable, Equatable {
    /// These changes, in the order they were made (empty: none since the last call).
    case changes([CacheChange])
    /// Changes were missed (the follower fell further behind than the feed keeps, or the feed
    /// started over): the memory tier may hold anything, so it is dropped whole.
    case missed
}
