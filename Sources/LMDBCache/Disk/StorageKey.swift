/// The bytes a key is stored under in LMDB.
///
/// LMDB keys hold at most 511 bytes, and the access and expiry indexes put an 8-byte time in front
/// of the stored key, so keys up to ``directLimit`` bytes are stored as they are. A longer key is
/// stored under its first ``prefixLength`` bytes followed by a 128-bit digest of the whole key; the
/// full key is then kept in the record and compared on every read, so a digest collision can make
/// a miss but never return another key's value.
///
/// `package` access: the key codec's fuzz target under `Fuzz/` drives it directly.
package struct StorageKey: Hashable, Sendable {
    /// The LMDB key.
    package let bytes: [UInt8]
    /// The whole key when it was too long to store directly.
    package let fullKey: [UInt8]?

    /// Longest key stored as it is: 511 (LMDB's maximum) less the indexes' 8-byte time prefix.
    package static let directLimit = 503
    package static let digestLength = 16
    package static let prefixLength = directLimit - digestLength

    package init(_ key: [UInt8]) throws {
        guard !key.isEmpty else { throw CacheError.invalidKey(reason: "keys must not be empty") }
        guard key.count <= Int(UInt32.max) else {
            throw CacheError.invalidKey(reason: "keys must be shorter than 4 GiB")
        }
        if key.count <= Self.directLimit {
            bytes = key
            fullKey = nil
        } else {
            var stored = Array(key[..<Self.prefixLength])
            stored.reserveCapacity(Self.directLimit)
            let digest = Self.digest(key)
            for shift in stride(from: 120, through: 0, by: -8) {
                stored.append(UInt8(truncatingIfNeeded: digest >> UInt128(shift)))
            }
            bytes = stored
            fullKey = key
        }
    }

    /// Rebuilds a key read back from the store (`bytes` as stored, the record's full key if any).
    package init(stored: [UInt8], fullKey: [UInt8]?) {
        bytes = stored
        self.fullKey = fullKey
    }

    /// Hashes the stored bytes in one call (the default hashes an array byte by byte); for long
    /// keys they include the whole key's digest.
    package func hash(into hasher: inout Hasher) {
        bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    }

    /// The key the user gave.
    package var key: [UInt8] { fullKey ?? bytes }

    /// FNV-1a, 128-bit: stable across processes and versions, which the stored layout needs.
    package static func digest(_ key: [UInt8]) -> UInt128 {
        var hash: UInt128 = 0x6c62_272e_07bb_0142_62b8_2175_6295_c58d
        let prime: UInt128 = 0x0000_0000_0100_0000_0000_0000_0000_013b
        for byte in key {
            hash ^= UInt128(byte)
            hash &*= prime
        }
        return hash
    }
}
