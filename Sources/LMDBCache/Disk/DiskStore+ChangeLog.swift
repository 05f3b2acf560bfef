import Foundation
import LMDBCacheStorage

// The change log: every write, removal, tag removal and removal of everything committed through
// the store is appended to the `changes` database in the transaction that makes it, so a reader
// of the log sees a change exactly when it sees its effect, and in commit order. Memory tiers
// that share the directory follow it (Coherence/ChangeFollower.swift) and drop what others
// changed. Trimming, expiry and damage are not logged: memory entries are copies with their own
// limits, and the disk tier they come from is shared.
extension DiskStore {
    /// Most changes the log keeps; a follower further behind drops its whole memory tier.
    /// At a write every 10 µs that is 0.6 s of writes; a follower polls every few milliseconds.
    static let changeLogCapacity: UInt64 = 1 << 16

    /// The info key of the sequence number of the newest change logged (0: none yet).
    static let changeHeadKey = Array("changeHead".utf8)

    /// Appends `changes` to the log in `txn`, stamped with the wall clock now, and drops the
    /// oldest past ``changeLogCapacity``.
    func appendChanges(_ changes: [CacheChange], _ txn: WriteTransaction) throws {
        try appendChanges(count: changes.count, txn) { index, time, buffer in
            let change = changes[index]
            CacheChange.encode(
                kind: change.kind, origin: change.origin, time: time, subject: change.subject, into: &buffer)
        }
    }

    /// Appends `count` changes, each encoded by `encode` (index, time, an empty buffer to append
    /// its bytes to), stamped with the wall clock now; once the log holds ``changeLogCapacity``,
    /// each append drops the oldest. One buffer for the lot and keys on the stack: a write's
    /// change allocates nothing.
    func appendChanges(
        count: Int, _ txn: WriteTransaction, encode: (Int, UInt64, inout [UInt8]) -> Void
    ) throws {
        guard count > 0 else { return }
        var head = try Totals.load(txn, db.info, Self.changeHeadKey)
        let time = CacheChange.wallClockNow()
        var buffer: [UInt8] = []
        for index in 0..<count {
            if head >= UInt64.max - Self.changeLogCapacity {
                // A damaged head near the top of the range: the log starts again at 1 (emptied,
                // so no old entry sorts after the new ones), which a follower sees as a head
                // behind its position and answers by dropping its memory tier.
                try txn.empty(db.changes)
                head = 0
            }
            head += 1
            buffer.removeAll(keepingCapacity: true)
            encode(index, time, &buffer)
            try withUnsafeBytes(of: head.bigEndian) { key in
                try buffer.withUnsafeBytes { try txn.append(db.changes, rawKey: key, $0) }
            }
            if head > Self.changeLogCapacity {
                // The log's entries are consecutive: the one `capacity` back is the oldest.
                try withUnsafeBytes(of: (head - Self.changeLogCapacity).bigEndian) {
                    _ = try txn.delete(db.changes, rawKey: $0)
                }
            }
        }
        try Totals.store(txn, db.info, Self.changeHeadKey, head)
    }

    /// What a follower at `position` finds in the log.
    enum ChangeRead {
        /// The changes after `position`, through `head`, oldest first (at most the limit asked).
        case changes([CacheChange], head: UInt64)
        /// Changes after `position` are gone (the log dropped them, or the store was emptied or
        /// replaced): the follower must drop its memory tier and go on from `head`.
        case fellBehind(head: UInt64)
    }

    /// The newest change's sequence number, committed.
    func changeHead() throws -> UInt64 {
        try env.read { try Totals.load($0, db.info, Self.changeHeadKey) }
    }

    /// The changes logged after `position`, at most `limit` of them; `.fellBehind` when one of
    /// them is gone or damaged (the follower cannot know what it said, so it drops its memory tier).
    func changes(after position: UInt64, limit: Int) throws -> ChangeRead {
        try env.read { txn in
            // `head` and every sequence come from the file: no arithmetic on them may trap.
            let head = try Totals.load(txn, db.info, Self.changeHeadKey)
            if head == position { return .changes([], head: head) }
            if head < position { return .fellBehind(head: head) }
            var changes: [CacheChange] = []
            var last = position  // below `head`, so `last + 1` cannot overflow
            var lost = false
            try txn.forEach(db.changes, from: Self.changeKey(last + 1)) { key, value in
                // A key of another length is no change (damage `cache-dump verify` reports): skipped.
                guard let sequence = Self.changeSequence(key) else { return true }
                guard sequence <= head else { return false }
                guard sequence == last + 1, let change = CacheChange(encoded: value) else {
                    lost = true
                    return false
                }
                changes.append(change)
                last = sequence
                return last < head && changes.count < limit
            }
            if lost || changes.isEmpty { return .fellBehind(head: head) }
            return .changes(changes, head: last)
        }
    }

    /// The log's key of change `sequence`: 8 bytes, big-endian, so the log is in commit order.
    static func changeKey(_ sequence: UInt64) -> [UInt8] {
        (0..<8).map { UInt8(truncatingIfNeeded: sequence >> UInt64(56 - 8 * $0)) }
    }

    /// The sequence number of a log key; nil when it is not 8 bytes.
    static func changeSequence(_ key: some Collection<UInt8>) -> UInt64? {
        guard key.count == 8 else { return nil }
        return key.reduce(0) { $0 << 8 | UInt64($1) }
    }
}
