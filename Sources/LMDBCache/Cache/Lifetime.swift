/// An entry's expiry and stale window in milliseconds since 1970: when lookups stop returning it,
/// and how long past that it is kept to be served stale (``Freshness/staleIfError``).
///
/// The disk tier stores the two as they are (the record's `expires` and `staleUntil`); the memory
/// tier's node keeps when it is gone (`expires`) and when it stops being served (`servedUntil`).
struct Lifetime: Equatable {
    /// When lookups stop returning the entry; 0: never.
    let expires: UInt64
    /// When the entry is gone, having been kept stale since ``expires``; 0: no stale window.
    let staleUntil: UInt64

    /// The lifetime of a value stored at `now` to expire after `expiresAfter` (nil: never; zero
    /// or negative: at once) and be kept `staleFor` more. A window needs an expiry, and one that
    /// saturates to nothing is no window.
    init(now: UInt64, expiresAfter: Duration?, staleFor: Duration?) {
        let expires = expiresAfter.map { now.addingSaturating($0.milliseconds) } ?? 0
        let until = staleFor.map { expires.addingSaturating($0.milliseconds) } ?? 0
        self.init(expires: expires, staleUntil: expires != 0 && until > expires ? until : 0)
    }

    init(expires: UInt64, staleUntil: UInt64) {
        self.expires = expires
        self.staleUntil = staleUntil
    }

    /// The memory node's `expires`: when the entry is gone.
    var memoryExpires: UInt64 { staleUntil != 0 ? staleUntil : expires }
    /// The memory node's `servedUntil`: 0 unless there is a stale window.
    var memoryServedUntil: UInt64 { staleUntil != 0 ? expires : 0 }
}
