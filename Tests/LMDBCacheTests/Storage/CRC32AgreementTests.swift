import LMDBCacheStorage
import Testing

@testable import LMDBCache

/// Storage's own CRC-32 (for its synced-snapshot record) and the disk tier's (libdeflate's, for
/// records) are the same function: one check that they agree.
@Suite("Storage's CRC-32 and the disk tier's agree")
struct CRC32AgreementTests {
    @Test(arguments: [0, 1, 3, 16, 255, 4_096, 65_537])
    func sameChecksum(length: Int) {
        let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 167 &+ length) }
        bytes.withUnsafeBytes { buffer in
            #expect(CRC32.checksum(buffer) == Deflate.crc32(buffer))
            #expect(CRC32.checksum(buffer, seed: 0x1234_5678) == Deflate.crc32(buffer, seed: 0x1234_5678))
        }
    }
}
