import Testing

@testable import LMDBCacheStorage

@Suite("Storage: CRC-32")
struct CRC32Tests {
    /// The check values of CRC-32 (IEEE, zlib's): "123456789" gives 0xCBF43926, nothing gives 0.
    @Test func knownValues() {
        #expect(Array("123456789".utf8).withUnsafeBytes { CRC32.checksum($0) } == 0xCBF4_3926)
        #expect([UInt8]().withUnsafeBytes { CRC32.checksum($0) } == 0)
        #expect(Array("The quick brown fox jumps over the lazy dog".utf8).withUnsafeBytes { CRC32.checksum($0) } == 0x414F_A339)
    }

    /// A CRC continued from the CRC of the bytes before equals the CRC of all of them.
    @Test func seedContinues() {
        let bytes = (0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
        let whole = bytes.withUnsafeBytes { CRC32.checksum($0) }
        let head = bytes[..<333].withUnsafeBytes { CRC32.checksum($0) }
        #expect(bytes[333...].withUnsafeBytes { CRC32.checksum($0, seed: head) } == whole)
    }
}
