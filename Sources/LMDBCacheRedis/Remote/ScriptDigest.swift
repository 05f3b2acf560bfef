#if Redis
import RESP

/// The tier's scripts sent by their SHA-1 digest (`EVALSHA`), as Redis names a script it holds:
/// a write then costs its arguments on the wire, not its script's 1–2 KB. A node that does not
/// hold the script (restarted, flushed, new in the cluster) answers `NOSCRIPT`, and the commands
/// so answered are sent again in full (`EVAL`), which loads it there.
enum ScriptDigest {
    /// Each script's digest, in lowercase hex, by its source.
    private static let digests: [[UInt8]: [UInt8]] = Dictionary(
        uniqueKeysWithValues: [
            RedisScripts.write, RedisScripts.namespaceFence, RedisScripts.tombstone, RedisScripts.tag,
            RedisScripts.fence, RedisScripts.unindex, RedisScripts.release,
        ].map { ($0, hex(sha1($0))) })

    /// `command` with its script named by digest when it is an `EVAL` of one of the tier's
    /// scripts; unchanged otherwise.
    static func bySHA(_ command: RedisCommand) -> RedisCommand {
        guard command.arguments.count > 1, command.arguments[0] == Array("EVAL".utf8),
            let digest = digests[command.arguments[1]]
        else { return command }
        var named = command
        named.arguments[0] = Array("EVALSHA".utf8)
        named.arguments[1] = digest
        return named
    }

    /// Whether `reply` says the node does not hold the script named.
    static func isMissingScript(_ reply: RESPValue) -> Bool {
        guard case .error(let message) = reply else { return false }
        return message.starts(with: Array("NOSCRIPT".utf8))
    }

    /// SHA-1 (FIPS 180-4) of `message`.
    static func sha1(_ message: [UInt8]) -> [UInt8] {
        var h: (UInt32, UInt32, UInt32, UInt32, UInt32) = (0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0)
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(truncatingIfNeeded: message.count) &* 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for block in stride(from: 0, to: padded.count, by: 64) {
            for t in 0..<16 {
                let i = block + t * 4
                w[t] = UInt32(padded[i]) << 24 | UInt32(padded[i + 1]) << 16 | UInt32(padded[i + 2]) << 8 | UInt32(padded[i + 3])
            }
            for t in 16..<80 { w[t] = rotate(w[t - 3] ^ w[t - 8] ^ w[t - 14] ^ w[t - 16], 1) }
            var (a, b, c, d, e) = h
            for t in 0..<80 {
                let f: UInt32
                let k: UInt32
                switch t {
                case 0..<20: (f, k) = ((b & c) | (~b & d), 0x5A82_7999)
                case 20..<40: (f, k) = (b ^ c ^ d, 0x6ED9_EBA1)
                case 40..<60: (f, k) = ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                default: (f, k) = (b ^ c ^ d, 0xCA62_C1D6)
                }
                let temp = rotate(a, 5) &+ f &+ e &+ k &+ w[t]
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, temp)
            }
            h = (h.0 &+ a, h.1 &+ b, h.2 &+ c, h.3 &+ d, h.4 &+ e)
        }
        return [h.0, h.1, h.2, h.3, h.4].flatMap { word in
            [24, 16, 8, 0].map { UInt8(truncatingIfNeeded: word >> UInt32($0)) }
        }
    }

    /// `bytes` as lowercase hex.
    static func hex(_ bytes: [UInt8]) -> [UInt8] {
        let digits = Array("0123456789abcdef".utf8)
        return bytes.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }
    }

    private static func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 { x << n | x >> (32 - n) }
}
#endif
