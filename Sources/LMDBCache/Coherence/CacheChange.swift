import Foundation

/// A change made through a cache that other caches sharing its data must apply to their memory
/// tiers: what a change feed (``ChangeFeed``) carries.
///
/// Encoded for the disk tier's change log and for any other transport as
/// `kind (1 byte) ‖ origin (8, little-endian) ‖ time (8, little-endian) ‖ subject`. The bytes come
/// from a file or a socket: ``init(encoded:)`` checks them and returns nil for anything else.
package struct CacheChange: Sendable, Equatable {
    package enum Kind: UInt8, Sendable {
        /// The entry of the key in ``subject`` (the key's bytes as the user gave them) was
        /// written or removed.
        case key = 1
        /// Every entry carrying the tag in ``subject`` (its stored bytes) was removed.
        case tag = 2
        /// Every entry was removed (``subject`` is empty).
        case all = 3
    }

    package var kind: Kind
    /// The cache that made the change (each ``Cache`` with a memory tier draws a random nonzero
    /// one), so it skips its own changes; 0 for a change made without a memory tier (a
    /// ``DiskCache``, `cache-dump`), which every follower applies.
    package var origin: UInt64
    /// When the change was committed, milliseconds since 1970 on the committing machine's wall
    /// clock: what a follower measures its lag against.
    package var time: UInt64
    package var subject: [UInt8]

    package init(kind: Kind, origin: UInt64, time: UInt64 = 0, subject: [UInt8] = []) {
        self.kind = kind
        self.origin = origin
        self.time = time
        self.subject = subject
    }

    /// The wall clock changes are stamped with and followers measure their lag on: the precise
    /// `CLOCK_REALTIME` (``CacheClock/system`` reads the coarse one, which may trail it by
    /// several milliseconds: a lag measured across the two would read low).
    package static func wallClockNow() -> UInt64 {
        UInt64(clamping: Int64((Date().timeIntervalSince1970 * 1_000).rounded(.down)))
    }

    /// Bytes before the subject.
    static let headerSize = 17

    /// The change's bytes.
    package var encoded: [UInt8] {
        var bytes: [UInt8] = []
        Self.encode(kind: kind, origin: origin, time: time, subject: subject, into: &bytes)
        return bytes
    }

    /// Appends the bytes of a change to `bytes` (the change log reuses one buffer for a batch).
    static func encode(kind: Kind, origin: UInt64, time: UInt64, subject: [UInt8], into bytes: inout [UInt8]) {
        bytes.reserveCapacity(bytes.count + Self.headerSize + subject.count)
        bytes.append(kind.rawValue)
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: origin >> UInt64(8 * index))) }
        for index in 0..<8 { bytes.append(UInt8(truncatingIfNeeded: time >> UInt64(8 * index))) }
        bytes.append(contentsOf: subject)
    }

    /// The change `bytes` encode; nil when they are not one (unknown kind, short, a key change
    /// without a key, a removal of everything with a subject).
    package init?(encoded bytes: UnsafeRawBufferPointer) {
        guard bytes.count >= Self.headerSize, let kind = Kind(rawValue: bytes[0]) else { return nil }
        let subject = Array(bytes[Self.headerSize...])
        switch kind {
        case .key, .tag: guard !subject.isEmpty else { return nil }
        case .all: guard subject.isEmpty else { return nil }
        }
        self.kind = kind
        origin = bytes.loadLE(UInt64.self, at: 1)
        time = bytes.loadLE(UInt64.self, at: 9)
        self.subject = subject
    }
}
