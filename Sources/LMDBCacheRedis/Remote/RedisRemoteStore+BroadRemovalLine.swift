#if Redis
import Synchronization

extension RedisRemoteStore {
    /// The writer's tag removals and removals of everything: the one under way, those due after
    /// it (in order), and the loads' values held until none is left.
    ///
    /// While a broad removal is unsent every lookup of this cache skips Redis
    /// (``RedisWriteQueue/mayHideUnsentChange(forKey:)``), so a get-or-load loads. Its value,
    /// sent at once, would meet a value the removal has yet to remove, be superseded and dropped
    /// here, and the next get would load again: one load per get for as long as a cluster's
    /// removal takes. Held, the value serves from the local tiers, and lands once the removal
    /// has (unless a removal or write newer than its load's start is there). One held for longer
    /// than ``RedisConfiguration/writeRetryLimit`` is given up when it comes back, and leaves
    /// this cache's tiers (``dropOwnCopy(of:)``): its load may have missed Redis's value.
    struct BroadRemovals {
        var running: BroadRemoval?
        var waiting: [PendingWrite] = []
        var heldLoads: [PendingWrite] = []

        var isIdle: Bool { running == nil && waiting.isEmpty }

        /// Whether `item` is a load's value to hold: a broad removal is under way, lined up or
        /// waiting in `retrying` for its retry.
        func holds(_ item: PendingWrite, retrying: [PendingWrite]) -> Bool {
            guard case .set(_, _, _, _, .some, _, _) = item.write else { return false }
            return !isIdle || retrying.contains { $0.write.needsLookup }
        }
    }

    /// Settles the broad removal under way once it has ended and starts the next one lined up.
    /// Returns what goes back to the retried writes: what the ended one left to retry, and, once
    /// no broad removal is left, the loads' values held meanwhile.
    func advance(_ broad: inout BroadRemovals, retrying: [PendingWrite]) -> [PendingWrite] {
        var back: [PendingWrite] = []
        if let running = broad.running, running.isDone {
            back = running.left
            broad.running = nil
        }
        if broad.running == nil, !broad.waiting.isEmpty { broad.running = startBroadRemoval(broad.waiting.removeFirst()) }
        if broad.isIdle, !broad.heldLoads.isEmpty, !(retrying + back).contains(where: { $0.write.needsLookup }) {
            back += broad.heldLoads
            broad.heldLoads = []
        }
        return back
    }

    /// Starts `item`, a broad removal, or lines it up after the one under way. Of the removals of
    /// everything lined up only the newest stays: its fence and tombstones do all the others
    /// would (they go unsent, finished, not dropped), so a burst of them costs two, not one
    /// each (the queue does the same for those it still holds, ``RedisWriteQueue``).
    func lineUp(_ item: PendingWrite, in broad: inout BroadRemovals) {
        guard broad.running != nil else {
            broad.running = startBroadRemoval(item)
            return
        }
        if case .removeAll(let version) = item.write {
            var newest = version
            for waiting in broad.waiting {
                if case .removeAll(let other) = waiting.write { newest = max(newest, other) }
            }
            broad.waiting.removeAll { waiting in
                guard case .removeAll(let other) = waiting.write, other < newest else { return false }
                queue.finished([waiting.queued])
                return true
            }
            guard version == newest else { return queue.finished([item.queued]) }
        }
        broad.waiting.append(item)
    }

    /// Holds `item`, a load's value, until the broad removals end; past the queue's limit the
    /// oldest held value is dropped, here too (``dropOwnCopy(of:)``).
    func hold(_ item: PendingWrite, in broad: inout BroadRemovals) {
        broad.heldLoads.append(item)
        while broad.heldLoads.count > queue.limit {
            let dropped = broad.heldLoads.removeFirst()
            drop(dropped)
            dropOwnCopy(of: dropped.write)
        }
    }

    /// A tag removal or removal of everything sent in a task of its own; what it leaves to retry
    /// goes back to the write loop when it ends.
    final class BroadRemoval: Sendable {
        private let finished = Atomic<Bool>(false)
        private let leftToRetry = Mutex<[PendingWrite]>([])

        /// Whether it has ended.
        var isDone: Bool { finished.load(ordering: .acquiring) }
        /// What it left to retry, once ``isDone``.
        var left: [PendingWrite] { leftToRetry.withLock { $0 } }

        init(_ body: @escaping @Sendable () async -> [PendingWrite]) {
            Task { [self] in
                let left = await body()
                leftToRetry.withLock { $0 = left }
                finished.store(true, ordering: .releasing)
            }
        }
    }

    func startBroadRemoval(_ item: PendingWrite) -> BroadRemoval {
        BroadRemoval { [self] in
            var left: [PendingWrite] = []
            await attempt([item], into: &left)
            return left
        }
    }
}
#endif
