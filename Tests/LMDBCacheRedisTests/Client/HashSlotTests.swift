#if Redis
import Testing

@testable import LMDBCacheRedis

@Suite struct HashSlotTests {
    private func bytes(_ string: String) -> [UInt8] { Array(string.utf8) }

    @Test func crcOfTheSpecificationsCheckString() {
        #expect(HashSlot.crc16(bytes("123456789")) == 0x31C3)
        #expect(HashSlot.crc16([]) == 0)
    }

    @Test func slotsRedisComputesForKnownKeys() {
        // The values `CLUSTER KEYSLOT` answers for these keys.
        #expect(HashSlot.slot(of: bytes("foo")) == 12182)
        #expect(HashSlot.slot(of: bytes("bar")) == 5061)
        #expect(HashSlot.slot(of: bytes("hello")) == 866)
        #expect(HashSlot.slot(of: bytes("123456789")) == 0x31C3 % 16384)
        #expect(HashSlot.slot(of: bytes("")) == 0)
        #expect(HashSlot.slot(of: bytes("{user1000}.following")) == 3443)
        #expect(HashSlot.slot(of: bytes("foo{}{bar}")) == 8363)
    }

    @Test func keysWithTheSameHashTagShareASlot() {
        let following = HashSlot.slot(of: bytes("{user1000}.following"))
        #expect(following == HashSlot.slot(of: bytes("{user1000}.followers")))
        #expect(following == HashSlot.slot(of: bytes("user1000")))
    }

    @Test func hashTagRules() {
        // The first `{` and the first `}` after it.
        #expect(HashSlot.hashedPart(of: bytes("foo{bar}{zap}")) == bytes("bar")[...])
        #expect(HashSlot.hashedPart(of: bytes("foo{{bar}}zap")) == bytes("{bar")[...])
        // An empty tag, or none closed: the whole key.
        #expect(HashSlot.hashedPart(of: bytes("foo{}{bar}")) == bytes("foo{}{bar}")[...])
        #expect(HashSlot.slot(of: bytes("foo{}{bar}")) == Int(HashSlot.crc16(bytes("foo{}{bar}"))) % 16384)
        #expect(HashSlot.hashedPart(of: bytes("foo{bar")) == bytes("foo{bar")[...])
        #expect(HashSlot.hashedPart(of: bytes("}foo{")) == bytes("}foo{")[...])
        #expect(HashSlot.hashedPart(of: bytes("{}")) == bytes("{}")[...])
    }

    @Test func slotsAreInRangeForBinaryKeys() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            let key = (0..<Int.random(in: 0..<40, using: &generator)).map { _ in UInt8.random(in: 0...255) }
            #expect((0..<HashSlot.count).contains(HashSlot.slot(of: key)))
        }
    }
}
#endif
