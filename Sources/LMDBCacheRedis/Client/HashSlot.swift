#if Redis
/// The Redis Cluster hash slot of a key, as the cluster specification defines it.
///
/// A key's slot is `CRC16(k) mod 16384`, where CRC16 is CRC-16/XMODEM (CCITT polynomial 0x1021,
/// initial value 0, no reflection, no final XOR) and `k` is the whole key, or its hash tag: the
/// bytes between the first `{` and the first `}` after it, when there is at least one byte
/// between them. So `{user1000}.following` and `{user1000}.followers` share a slot, and
/// `foo{}{bar}` hashes whole.
package enum HashSlot {
    /// The number of slots a cluster divides its keys over: 16384.
    package static let count = 16384

    /// The slot `key` belongs to, in `0..<count`.
    package static func slot(of key: some Collection<UInt8>) -> Int {
        let hashed = hashedPart(of: key)
        return Int(crc16(hashed)) & (count - 1)
    }

    /// The part of `key` that is hashed: its hash tag if it has a non-empty one, else all of it.
    package static func hashedPart<Key: Collection<UInt8>>(of key: Key) -> Key.SubSequence {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")) else { return key[...] }
        let afterOpen = key.index(after: open)
        guard let close = key[afterOpen...].firstIndex(of: UInt8(ascii: "}")), close != afterOpen else {
            return key[...]
        }
        return key[afterOpen..<close]
    }

    /// CRC-16/XMODEM of `bytes`: the checksum Redis Cluster hashes keys with.
    ///
    /// - Complexity: O(n), one table look-up per byte.
    package static func crc16(_ bytes: some Sequence<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc = (crc << 8) ^ table[Int(UInt8(truncatingIfNeeded: crc >> 8) ^ byte)]
        }
        return crc
    }

    /// The CRC of each byte value, shifted into the top of the register: 256 entries.
    private static let table: [UInt16] = (0..<256).map { byte in
        var crc = UInt16(byte) << 8
        for _ in 0..<8 {
            crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
        }
        return crc
    }
}
#endif
