#if Redis
import LMDBCache
import NIOConcurrencyHelpers

/// The version every remote write carries: a hybrid logical clock's reading (wall-clock
/// milliseconds since 1970 and a counter) and the writing cache's origin.
///
/// Versions are totally ordered (milliseconds, then counter, then origin; two caches never share
/// an origin) and one cache's readings only grow, whatever its wall clock does (``VersionClock``).
/// A loaded value carries the reading taken when its load began (so it is older than what the
/// cache changed while the loader ran); every other write, the reading when it is made.
/// Redis keeps the newest write of a key and refuses older ones (``RedisScripts``), so a write
/// replayed after a lost reply, or one that arrives late, cannot replace a newer one. Across
/// machines "newer" is the hybrid clock's order: a write made after this machine read another's
/// record is newer than it, and otherwise the wall clocks decide, so clocks kept within a few
/// milliseconds by NTP order writes the way they were made.
struct RecordVersion: Comparable, Hashable, Sendable {
    /// Wall-clock milliseconds since 1970 (at most 2⁴⁸ − 1).
    var milliseconds: UInt64
    /// Orders versions made in the same millisecond.
    var counter: UInt16
    /// The writing cache's origin.
    var origin: UInt64

    static let maximumMilliseconds: UInt64 = (1 << 48) - 1

    /// The smallest version of the given millisecond (a load's start, compared with removals).
    init(milliseconds: UInt64, counter: UInt16 = 0, origin: UInt64 = 0) {
        self.milliseconds = min(milliseconds, Self.maximumMilliseconds)
        self.counter = counter
        self.origin = origin
    }

    /// The version's milliseconds and counter in one number (its origin left out): what
    /// ``LMDBCache/RemoteStore/loadStamp()`` hands the cache when a load begins.
    var stamp: UInt64 { milliseconds << 16 | UInt64(counter) }

    /// The version a load stamped `stamp` (``stamp``) has, of this cache's `origin`.
    init(stamp: UInt64, origin: UInt64) {
        self.init(milliseconds: stamp >> 16, counter: UInt16(truncatingIfNeeded: stamp), origin: origin)
    }

    static func < (lhs: RecordVersion, rhs: RecordVersion) -> Bool {
        (lhs.milliseconds, lhs.counter, lhs.origin) < (rhs.milliseconds, rhs.counter, rhs.origin)
    }

    /// Its length encoded.
    static let encodedCount = 32

    /// 32 lowercase hexadecimal digits: 12 for the milliseconds, 4 for the counter, 16 for the
    /// origin. The scripts compare versions by these fields.
    var encoded: [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Self.encodedCount)
        Self.appendHex(milliseconds, digits: 12, to: &bytes)
        Self.appendHex(UInt64(counter), digits: 4, to: &bytes)
        Self.appendHex(origin, digits: 16, to: &bytes)
        return bytes
    }

    /// The version `bytes` encode; nil unless they are exactly 32 hexadecimal digits (bytes read
    /// from Redis are untrusted).
    init?(encoded bytes: some Collection<UInt8>) {
        guard bytes.count == Self.encodedCount else { return nil }
        let start = bytes.startIndex
        let counterStart = bytes.index(start, offsetBy: 12)
        let originStart = bytes.index(counterStart, offsetBy: 4)
        guard let milliseconds = Self.hexNumber(bytes[start..<counterStart]),
            let counter = Self.hexNumber(bytes[counterStart..<originStart]),
            let origin = Self.hexNumber(bytes[originStart...])
        else { return nil }
        self.init(milliseconds: milliseconds, counter: UInt16(truncatingIfNeeded: counter), origin: origin)
    }

    /// The number up to 16 lowercase hexadecimal digits spell; nil for anything else.
    static func hexNumber(_ digits: some Collection<UInt8>) -> UInt64? {
        guard !digits.isEmpty, digits.count <= 16 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard let digit = hexValue(byte) else { return nil }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    static func appendHex(_ value: UInt64, digits: Int, to bytes: inout [UInt8]) {
        let alphabet = Array("0123456789abcdef".utf8)
        for shift in stride(from: (digits - 1) * 4, through: 0, by: -4) {
            bytes.append(alphabet[Int(truncatingIfNeeded: (value >> UInt64(shift)) & 0xF)])
        }
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
        default: return nil
        }
    }
}

/// One cache's hybrid logical clock: each ``next()`` is greater than every version it returned
/// before and every version ``observe(_:)`` saw, and follows the wall clock when that is ahead.
final class VersionClock: Sendable {
    private let last = NIOLockedValueBox(RecordVersion(milliseconds: 0))
    let origin: UInt64
    private let wallClock: @Sendable () -> UInt64

    /// How far ahead of this machine's wall clock an observed version may be and still move the
    /// clock: a version further ahead (a machine whose clock is wrong, or a foreign value) is
    /// ignored rather than carried into every later write.
    static let observeLimit: UInt64 = 60_000

    init(origin: UInt64, wallClock: @escaping @Sendable () -> UInt64 = { CacheChange.wallClockNow() }) {
        self.origin = origin
        self.wallClock = wallClock
    }

    /// A version greater than every one before.
    func next() -> RecordVersion {
        let now = min(wallClock(), RecordVersion.maximumMilliseconds)
        return last.withLockedValue { last in
            var version = RecordVersion(milliseconds: max(now, last.milliseconds), origin: origin)
            if version.milliseconds == last.milliseconds {
                if last.counter == .max {
                    // 65,536 versions in one millisecond: borrow the next one.
                    version.milliseconds = min(version.milliseconds + 1, RecordVersion.maximumMilliseconds)
                } else {
                    version.counter = last.counter + 1
                }
            }
            last = RecordVersion(milliseconds: version.milliseconds, counter: version.counter)
            return version
        }
    }

    /// A version read from Redis: later versions made here are greater (unless it is more than
    /// ``observeLimit`` ahead of the wall clock).
    func observe(_ version: RecordVersion) {
        guard version.milliseconds <= wallClock().addingReportingOverflow(Self.observeLimit).partialValue else { return }
        last.withLockedValue { last in
            let seen = RecordVersion(milliseconds: version.milliseconds, counter: version.counter)
            if last < seen { last = seen }
        }
    }
}
#endif
