import Foundation

/// A key a ``Cache`` can store: hashable for the memory tier, and convertible to and from the
/// bytes the disk tier stores it under.
///
/// Distinct keys must give distinct bytes, and `init(cacheKeyBytes:)` must give back the key
/// whose bytes they are (the removal listener rebuilds keys of evicted disk entries with it).
/// `String`, `Int`, `UUID` and `[UInt8]` conform; conform your own types the same way.
public protocol CacheKey: Hashable, Sendable {
    /// The bytes the disk tier stores the entry under.
    var cacheKeyBytes: [UInt8] { get }
    /// The key whose ``cacheKeyBytes`` are `bytes`, or nil when no key has these bytes.
    init?(cacheKeyBytes bytes: [UInt8])
}

extension String: CacheKey {
    /// The UTF-8 bytes of the key's Unicode Normalization Form C.
    ///
    /// Swift compares strings by canonical equivalence, so `"caf\u{E9}"` and `"cafe\u{301}"` are
    /// one key in memory; normalising makes them one key on disk too. Strings of code points below
    /// U+0300 (ASCII and Latin-1 among them) are already in NFC and skip the normalisation.
    public var cacheKeyBytes: [UInt8] {
        // In UTF-8, every byte below 0xCC belongs to a code point below U+0300; none of those
        // composes with a neighbour or has a different NFC form.
        if utf8.allSatisfy({ $0 < 0xCC }) { return Array(utf8) }
        return Array(precomposedStringWithCanonicalMapping.utf8)
    }

    /// The string whose UTF-8 bytes these are; nil when they are not valid UTF-8.
    public init?(cacheKeyBytes bytes: [UInt8]) {
        self.init(validating: bytes, as: UTF8.self)
    }
}

extension Int: CacheKey {
    /// The key's 8 bytes, big-endian.
    public var cacheKeyBytes: [UInt8] {
        withUnsafeBytes(of: Int64(self).bigEndian) { Array($0) }
    }

    /// The integer stored as 8 big-endian bytes; nil for any other length.
    public init?(cacheKeyBytes bytes: [UInt8]) {
        guard bytes.count == 8 else { return nil }
        self.init(Int64(bigEndian: bytes.withUnsafeBytes { $0.loadUnaligned(as: Int64.self) }))
    }
}

extension UUID: CacheKey {
    /// The key's 16 bytes.
    public var cacheKeyBytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }

    /// The UUID stored as 16 bytes; nil for any other length.
    public init?(cacheKeyBytes bytes: [UInt8]) {
        guard bytes.count == 16 else { return nil }
        self.init(uuid: bytes.withUnsafeBytes { $0.loadUnaligned(as: uuid_t.self) })
    }
}

extension Array: CacheKey where Element == UInt8 {
    /// The key itself.
    public var cacheKeyBytes: [UInt8] { self }

    /// The same bytes.
    public init?(cacheKeyBytes bytes: [UInt8]) {
        self = bytes
    }
}
