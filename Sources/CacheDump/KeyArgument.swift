import Foundation
import LMDBCacheStorage

/// How a key is written on the command line: as text (its UTF-8 bytes), hexadecimal or base64,
/// so that keys that are not UTF-8 can be named too.
public enum KeyEncoding: String, CaseIterable, Sendable {
    case utf8, hex, base64

    /// The key bytes `text` names in this encoding, or nil when it is not valid.
    public func bytes(_ text: String) -> [UInt8]? {
        switch self {
        case .utf8:
            return Array(text.utf8)
        case .base64:
            return Data(base64Encoded: text).map { [UInt8]($0) }
        case .hex:
            let digits = Array(text.utf8)
            guard digits.count % 2 == 0 else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(digits.count / 2)
            for index in stride(from: 0, to: digits.count, by: 2) {
                guard let high = Self.nibble(digits[index]), let low = Self.nibble(digits[index + 1]) else {
                    return nil
                }
                bytes.append(high << 4 | low)
            }
            return bytes
        }
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

/// How `cache-dump` shows a key: as text, with the bytes that are not UTF-8, controls, the
/// backslash and invisible format and separator characters escaped (``TerminalText``), so a key
/// can neither act on the terminal nor pass for another.
public func displayKey(_ key: [UInt8]) -> String {
    TerminalText.escaped(key)
}

/// Lowercase hexadecimal of `bytes`.
public func hexString(_ bytes: [UInt8]) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var text = [UInt8]()
    text.reserveCapacity(bytes.count * 2)
    for byte in bytes {
        text.append(digits[Int(byte >> 4)])
        text.append(digits[Int(byte & 15)])
    }
    return String(decoding: text, as: UTF8.self)
}
