/// Text from outside the tool made safe to print on a terminal.
///
/// Keys, process names and anything else read from the store, a file or `/proc` were written by
/// someone else, possibly another user. Printed raw, an escape sequence in one can drive the
/// administrator's terminal (retitle it, clear it, redraw what it shows), and a bidirectional
/// control can make `list` show one key as another (`invoice\u{202E}fdp.exe` displays as
/// `invoiceexe.pdf`). ``escaped(_:)`` is the one function every such string goes through before
/// cache-dump prints it, as a table cell, a message or a JSON string:
///
/// - a byte that is not part of valid UTF-8, a C0 control (U+0000–U+001F, tab and newline
///   included), DEL (U+007F) and the backslash become `\xNN` (two lowercase hex digits);
/// - a C1 control (U+0080–U+009F) and any character of the Unicode categories Cf (format: the
///   bidirectional marks, embeddings, overrides and isolates, zero-width characters, the
///   byte-order mark, tag characters), Zl (U+2028) or Zp (U+2029) becomes `\u{XXXX}` (uppercase
///   hex, at least four digits);
/// - everything else, any script, stays as it is.
///
/// A backslash in the result always starts an escape, so the original bytes can be read back.
public enum TerminalText {
    /// `bytes` read as UTF-8, with every byte and character that could act on a terminal or
    /// reorder the text around it escaped.
    public static func escaped(_ bytes: some Collection<UInt8>) -> String {
        let bytes = Array(bytes)
        var text = ""
        text.reserveCapacity(bytes.count)
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        // Bytes consumed so far: the parser reports how many an invalid sequence took.
        var offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                append(Unicode.UTF8.decode(encoded), to: &text)
                offset += encoded.count
            case .error(let length):
                for byte in bytes[offset..<offset + length] { text += byteEscape(byte) }
                offset += length
            case .emptyInput:
                return text
            }
        }
    }

    /// `text` with the same escapes (it is valid UTF-8, so no `\xNN` but for controls, DEL and
    /// the backslash).
    public static func escaped(_ text: String) -> String {
        escaped(text.utf8)
    }

    /// True when `scalar` is shown escaped.
    public static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7f...0x9f, 0x5c: return true
        default:
            switch scalar.properties.generalCategory {
            case .format, .lineSeparator, .paragraphSeparator: return true
            default: return false
            }
        }
    }

    private static func append(_ scalar: Unicode.Scalar, to text: inout String) {
        guard needsEscape(scalar) else {
            text.unicodeScalars.append(scalar)
            return
        }
        if scalar.value < 0x80 {
            text += byteEscape(UInt8(truncatingIfNeeded: scalar.value))
        } else {
            let digits = String(scalar.value, radix: 16, uppercase: true)
            text += "\\u{" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits + "}"
        }
    }

    private static func byteEscape(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(decoding: [0x5c, 0x78, digits[Int(byte >> 4)], digits[Int(byte & 15)]], as: UTF8.self)
    }
}
