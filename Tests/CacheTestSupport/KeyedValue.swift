/// Values that name their key: a reader can tell a value stored under the wrong key, or a wrong
/// or damaged value, from the value alone (the multi-process and corruption tests).
///
/// Layout: the key's UTF-8 length (1 byte), the key, an 8-byte little-endian seed, then
/// `sampleBytes(count:compressible:seed:)` of a length and kind the seed picks.
public enum KeyedValue {
    /// The value written for `key` with `seed`: 20 bytes to about 6 KB, compressible or not.
    public static func make(key: String, seed: UInt64) -> [UInt8] {
        let keyBytes = Array(key.utf8)
        precondition(keyBytes.count < 256)
        var value = [UInt8(keyBytes.count)] + keyBytes
        withUnsafeBytes(of: seed.littleEndian) { value.append(contentsOf: $0) }
        value.append(contentsOf: body(seed))
        return value
    }

    /// True when `value` is one that `make(key:seed:)` gives for `key` (whatever the seed).
    public static func isValid(_ value: [UInt8], forKey key: String) -> Bool {
        let keyBytes = Array(key.utf8)
        let seedStart = 1 + keyBytes.count
        guard value.count >= seedStart + 8, Int(value[0]) == keyBytes.count,
            Array(value[1..<seedStart]) == keyBytes
        else { return false }
        var seed: UInt64 = 0
        for (shift, byte) in value[seedStart..<(seedStart + 8)].enumerated() { seed |= UInt64(byte) << (8 * shift) }
        return Array(value[(seedStart + 8)...]) == body(seed)
    }

    private static func body(_ seed: UInt64) -> [UInt8] {
        let sizes = [8, 200, 1_500, 4_000, 6_000]
        return sampleBytes(count: sizes[Int(seed % 5)], compressible: seed % 3 != 0, seed: seed)
    }
}

/// The operations `cache-test-helper mixed` performs: reads, writes (some expiring), removes and
/// trims over 400 keys that every process shares, a deterministic sequence per process.
public enum MixedWorkload {
    public static let keyCount = 400

    public enum Operation: Equatable {
        case set(key: String, seed: UInt64, expiresAfterSeconds: Int?)
        case get(key: String)
        case remove(key: String)
        case trimToCount(Int)
        case trimToCost(Int)
        case removeExpired
    }

    /// Operation `index` of process `process`.
    public static func operation(process: Int, index: Int) -> Operation {
        var state = UInt64(process &+ 1) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(index) &* 0xBF58_476D_1CE4_E5B9
        state ^= state >> 31
        state &*= 0x94D0_49BB_1331_11EB
        state ^= state >> 29
        let key = "m\(state % UInt64(keyCount))"
        switch (state >> 16) % 100 {
        case 0..<45: return .set(key: key, seed: state, expiresAfterSeconds: state % 10 == 0 ? 3_600 : nil)
        case 45..<80: return .get(key: key)
        case 80..<96: return .remove(key: key)
        case 96..<98: return .trimToCount(keyCount / 2)
        case 98: return .trimToCost(256 << 10)
        default: return .removeExpired
        }
    }
}
