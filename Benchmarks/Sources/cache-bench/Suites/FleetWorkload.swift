import BenchmarkData
import Foundation

// What the fleet suite's nodes store and in which order they ask for it: deterministic keys,
// values that say which key and which write they belong to, and seeded orders. Shared by the
// parent (FleetSuite.swift) and the node processes (FleetNode.swift).

/// The values of the fleet suite: 4 KB of JSON-like text (an API response; LMDBCache compresses
/// it about 2-3x on disk and in Redis), its first 16 bytes replaced by the key's index and the
/// write's version (little-endian), so a value read back is checked to be its key's, of the
/// expected write.
enum FleetValue {
    static let payload = Payload.json4K
    static let bytes = payload.size
    /// Distinct texts; key `i` uses `pool[i % count]`.
    static let pool = payload.pool(count: 64, seed: 0xF1EE7)

    /// The cache key of `index` under `prefix`: `prefix:index`.
    static func key(_ prefix: Substring, _ index: Int) -> String { "\(prefix):\(index)" }

    /// Write `version` of key `index`.
    static func make(index: Int, version: UInt64) -> [UInt8] {
        var value = pool[index % pool.count]
        let number = UInt64(index)
        for byte in 0..<8 {
            value[byte] = UInt8(truncatingIfNeeded: number >> UInt64(8 * byte))
            value[8 + byte] = UInt8(truncatingIfNeeded: version >> UInt64(8 * byte))
        }
        return value
    }

    /// Throws unless `value` is write `version` of key `index` (`key` names it in the message).
    static func check(_ value: [UInt8], key: String, index: Int, version: UInt64) throws {
        guard value.count == bytes else {
            throw FleetFailure("\(key) returned \(value.count) bytes, not \(bytes)")
        }
        let (storedIndex, storedVersion) = value.withUnsafeBytes { raw in
            (
                UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self)),
                UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            )
        }
        guard storedIndex == UInt64(index), storedVersion == version else {
            throw FleetFailure(
                "\(key) returned write \(storedVersion) of key \(storedIndex), not write \(version) of key \(index)")
        }
        guard value[16...].elementsEqual(pool[index % pool.count][16...]) else {
            throw FleetFailure("\(key) returned a damaged value")
        }
    }

    /// `from..<from + count` in an order drawn from `seed`.
    static func order(from: Int, count: Int, seed: UInt64) -> [Int] {
        var random = SplitMix64(seed: SplitMix64.mix(seed))
        var indices = Array(from..<(from + count))
        indices.shuffle(using: &random)
        return indices
    }

    /// `count` key indices drawn Zipf(0.99) over `keys` keys: the ranks' order is seeded by
    /// `seed` alone (every node shares the hot keys), the draws by `seed` and `node`.
    static func zipf(keys: Int, count: Int, seed: UInt64, node: Int) -> [Int] {
        let sampler = ZipfSampler(count: keys, exponent: Distribution.zipfExponent, seed: seed)
        var random = SplitMix64(seed: SplitMix64.mix(seed &+ UInt64(node) &* 0x9E37))
        return (0..<count).map { _ in Int(sampler.keyIndex(unit: random.nextUnit())) }
    }
}

/// A failure of the fleet suite: a node that answered wrongly or not at all, a value that is not
/// its key's, a call served by another tier than the phase expects.
struct FleetFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
