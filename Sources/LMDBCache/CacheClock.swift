import Foundation
import LMDBCacheStorage
import Glibc

/// Where a cache reads the current time.
///
/// Expiry, age limits and access order all read this clock. Tests inject one they advance by hand,
/// so time-dependent behaviour is checked without sleeping.
public struct CacheClock: Sendable {
    @usableFromInline let read: @Sendable () -> Date
    /// Reads `clock_gettime` directly: the memory tier reads the time on every hit.
    @usableFromInline let isSystem: Bool

    /// A clock that reads `now` each time the cache needs the time.
    public init(_ now: @escaping @Sendable () -> Date) {
        read = now
        isSystem = false
    }

    private init(system: Void) {
        read = { Date() }
        isSystem = true
    }

    /// The wall clock, read at the kernel's coarse resolution (a few milliseconds).
    public static let system = CacheClock(system: ())

    /// The current time.
    public var now: Date { read() }

    /// The current time in whole milliseconds since 1970, the unit stored on disk.
    @inlinable
    var milliseconds: UInt64 {
        if isSystem {
            var time = timespec()
            // The coarse clock (a few milliseconds' resolution) reads the kernel's last tick
            // without a timer read: a fraction of the cost, and precise enough for ages and TTLs.
            clock_gettime(CLOCK_REALTIME_COARSE, &time)
            return UInt64(max(0, time.tv_sec)) * 1_000 + UInt64(max(0, time.tv_nsec)) / 1_000_000
        }
        return UInt64(max(0, (read().timeIntervalSince1970 * 1_000).rounded(.down)))
    }
}

extension UInt64 {
    /// `self + other`, or `UInt64.max` when the sum does not fit: deadlines built from untrusted
    /// or "forever" durations stay in range.
    @inlinable
    func addingSaturating(_ other: UInt64) -> UInt64 {
        let (sum, overflow) = addingReportingOverflow(other)
        return overflow ? .max : sum
    }

    /// The time an entry last used before is idle for `age` or longer, `self` being now: the one
    /// age cut-off of both tiers' trims, the same rule as the memory tier's age limit on lookups
    /// (idle means last used at least `age` ago and before now; a clock that went back is no
    /// idling). 0, removing nothing, when `age` reaches back before 1970.
    @inlinable
    func cutoff(forAge age: Duration) -> UInt64 {
        let age = age.milliseconds
        guard age > 0 else { return self }
        return age > self ? 0 : self - age + 1
    }

    /// `self - other`, or 0 when `other` is larger: a cut-off that would lie before 1970.
    @inlinable
    func subtractingSaturating(_ other: UInt64) -> UInt64 {
        self > other ? self - other : 0
    }
}
