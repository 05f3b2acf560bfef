/// Deterministic bytes: `compressible` ones look like JSON text, the others are random
/// (xorshift64, so a seed always gives the same bytes).
public func sampleBytes(count: Int, compressible: Bool, seed: UInt64 = 42) -> [UInt8] {
    if compressible {
        let text = Array(#"{"id":"article-000","title":"Caching on Linux","body":"lorem ipsum dolor sit amet "}"#.utf8)
        let offset = Int(seed % UInt64(text.count))
        return (0..<count).map { text[($0 + offset) % text.count] }
    }
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    return (0..<count).map { _ in
        state ^= state << 13
        state ^= state >> 7
        state ^= state << 17
        return UInt8(truncatingIfNeeded: state)
    }
}
