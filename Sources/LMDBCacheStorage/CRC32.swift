/// CRC-32 as zlib's `crc32` computes it (IEEE 802.3: reflected polynomial 0xEDB88320, initial
/// and final XOR with all ones), one table lookup per byte.
///
/// For the small records Storage checksums itself (``SyncedSnapshot``'s). The disk tier's records
/// use libdeflate's accelerated CRC-32, the same function (a test checks they agree).
package enum CRC32 {
    /// The CRC of every byte value, shifted through the polynomial eight times.
    private static let table: [UInt32] = (0..<256).map { byte in
        var crc = UInt32(byte)
        for _ in 0..<8 {
            crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1
        }
        return crc
    }

    /// The CRC-32 of `bytes`, continuing from `seed` (the CRC of the bytes before; 0 to start).
    package static func checksum(_ bytes: UnsafeRawBufferPointer, seed: UInt32 = 0) -> UInt32 {
        var crc = ~seed
        for byte in bytes {
            crc = table[Int(UInt8(truncatingIfNeeded: crc) ^ byte)] ^ (crc >> 8)
        }
        return ~crc
    }
}
