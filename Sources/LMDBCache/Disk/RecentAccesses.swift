import LMDBCacheStorage

/// The uses of entries this process recorded lately, so that a read records a use only when the
/// one on record is old relative to the store's access span.
///
/// The disk tier's least-recently-used order is approximate by design: a read does not move its
/// entry at once, it asks the writer to record the time later, and each recorded use costs two
/// small writes in the next commit. Recording only uses that change the order noticeably keeps
/// those writes rare. A read records a use when the entry's last recorded use (the later of its
/// write and what this table remembers) is older than ``threshold(granularity:span:ageLimit:)``:
/// an eighth of the time from the store's least recently used entry to now, but never less than
/// the configured granularity and never more than an eighth of the age limit. So an entry's recorded
/// last use trails its true one by at most that much, as the memory tier skips moves within its
/// newest eighth.
///
/// A fixed table of key fingerprints and times, in stripes under their own locks, so a read costs
/// one uncontended lock and no LMDB lookup. Two keys that share a slot push each other out; a key
/// forgotten that way is recorded again on its next read: one more write, never a wrong order.
/// Other processes' recorded uses are not seen: each process records at most one use per key per
/// threshold.
final class RecentAccesses: Sendable {
    private struct Stripe {
        var fingerprints: [UInt64]
        var times: [UInt64]
    }

    private let stripes: [Locked<Stripe>]
    private let slotsPerStripe: Int

    /// Stripes and slots: 64 × 1,024, 1 MiB per store; enough that the entries a store reads
    /// within a threshold rarely share a slot.
    init(stripes: Int = 64, slotsPerStripe: Int = 1_024) {
        self.slotsPerStripe = slotsPerStripe
        self.stripes = (0..<stripes).map { _ in
            Locked(
                Stripe(
                    fingerprints: [UInt64](repeating: 0, count: slotsPerStripe),
                    times: [UInt64](repeating: 0, count: slotsPerStripe)))
        }
    }

    /// The fraction of the access span within which a use is not recorded again.
    static let spanFraction: UInt64 = 8

    /// How old the last recorded use must be for a read to record a new one: an eighth of `span`
    /// (milliseconds from the least recently used entry to now) and of `ageLimit`, whichever is
    /// smaller, but at least `granularity`. All in milliseconds.
    static func threshold(granularity: UInt64, span: UInt64, ageLimit: UInt64?) -> UInt64 {
        let relative = min(span / spanFraction, (ageLimit ?? .max) / spanFraction)
        return max(granularity, relative)
    }

    /// True when a read at `now` of `key`, whose record was written at `created`, should record a
    /// use: the latest use on record is at least `threshold` old. Remembers `now` for the key when
    /// it answers true, so concurrent readers of one key record it once.
    func shouldRecord(_ key: StorageKey, created: UInt64, now: UInt64, threshold: UInt64) -> Bool {
        let (fingerprint, stripe, slot) = place(key)
        return stripes[stripe].withLock { stripe in
            var recorded = created
            if stripe.fingerprints[slot] == fingerprint { recorded = max(recorded, stripe.times[slot]) }
            guard now > recorded, now - recorded >= threshold else { return false }
            stripe.fingerprints[slot] = fingerprint
            stripe.times[slot] = now
            return true
        }
    }

    /// Forgets the use remembered for `key`: its update was lost (its batch failed), so the next
    /// read records it again.
    func forget(_ key: StorageKey) {
        let (fingerprint, stripe, slot) = place(key)
        stripes[stripe].withLock { stripe in
            if stripe.fingerprints[slot] == fingerprint { stripe.fingerprints[slot] = 0 }
        }
    }

    /// The key's fingerprint (low bit set, so an empty slot, zero, never matches) and its slot.
    private func place(_ key: StorageKey) -> (fingerprint: UInt64, stripe: Int, slot: Int) {
        var hasher = Hasher()
        hasher.combine(key)
        let hash = UInt64(bitPattern: Int64(hasher.finalize()))
        return (
            hash | 1, Int(truncatingIfNeeded: (hash >> 32) % UInt64(stripes.count)),
            Int(truncatingIfNeeded: (hash >> 12) % UInt64(slotsPerStripe))
        )
    }
}
