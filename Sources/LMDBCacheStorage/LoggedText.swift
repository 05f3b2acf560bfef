import Logging

/// How LMDBCache shows text it did not write itself (keys, paths, cache names, stored strings,
/// other code's error messages) in log messages and in errors' descriptions.
///
/// Such text may hold whatever a client sent. Shown as it is, a newline in a key forges a log
/// line, an escape sequence rewrites an operator's terminal, a bidirectional control reorders
/// what the operator reads, and a 10 MB key makes a 10 MB log line. So every such text is
/// rendered by ``render(_:limit:)``:
///
/// - **Escaped** as the inside of a Swift string literal: `\` as `\\`, `"` as `\"`, newline,
///   carriage return, tab and NUL as `\n`, `\r`, `\t`, `\0`, and as `\u{XXXX}` (hexadecimal)
///   every other control character (C0, DEL, C1), Unicode format character (category Cf: bidi
///   controls such as U+202E, zero-width characters, the byte order mark, tags), line or paragraph
///   separator (U+2028, U+2029) and code point unassigned in the running Swift's Unicode tables.
///   Everything else, letters of every script and emoji included, is shown as it is.
/// - **Cut short** once it would pass `limit` characters (counted after escaping, so a rendering
///   is bounded however long the text and whatever it holds): ``keyLimit`` (64) for a key,
///   ``textLimit`` (1,024) for anything else. A text cut short ends with `…[N bytes]`, N its
///   length in UTF-8 bytes.
///
/// A rendering is never hashed: it shows the text (a key holding a token or an email address
/// shows its first 64 characters), so an operator can tell which entry a line is about.
///
/// ```swift
/// LoggedText.render("a\nb\u{202E}c")                  // a\nb\u{202E}c
/// LoggedText.key(String(repeating: "x", count: 100))  // 64 x's, then …[100 bytes]
/// ```
package enum LoggedText {
    /// The most characters of a key a rendering shows, escapes included: 64.
    package static let keyLimit = 64
    /// The most characters of any other text (a path, a name, an error message) a rendering
    /// shows, escapes included: 1,024.
    package static let textLimit = 1_024

    /// `text` escaped and, past `limit` characters, cut short (see ``LoggedText``).
    ///
    /// Reads at most `limit` of `text`'s Unicode scalars, so rendering a huge text is cheap. A
    /// negative `limit` counts as 0.
    package static func render(_ text: some StringProtocol, limit: Int = textLimit) -> String {
        let limit = max(0, limit)
        var rendered = ""
        var used = 0
        for scalar in text.unicodeScalars {
            let escape = escaped(scalar)
            let width = escape?.utf8.count ?? 1
            guard width <= limit - used else {
                rendered += "…[\(text.utf8.count) bytes]"
                return rendered
            }
            used += width
            if let escape { rendered += escape } else { rendered.unicodeScalars.append(scalar) }
        }
        return rendered
    }

    /// An error's description as ``render(_:limit:)`` shows it; the description of an error
    /// that renders the text it carries already (``RenderedDescription``) as it is.
    package static func error(_ error: any Error) -> String {
        if let error = error as? any RenderedDescription { return error.description }
        return render(String(describing: error))
    }

    /// The escape sequence that shows `scalar`, or nil when it is shown as it is.
    static func escaped(_ scalar: Unicode.Scalar) -> String? {
        switch scalar {
        case "\\": return "\\\\"
        case "\"": return "\\\""
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        case "\0": return "\\0"
        default: break
        }
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F:
            break
        default:
            switch scalar.properties.generalCategory {
            case .format, .lineSeparator, .paragraphSeparator, .unassigned: break
            default: return nil
            }
        }
        return "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
    }
}

extension Logger.MetadataValue {
    /// `text` as ``LoggedText/render(_:limit:)`` shows it: for a path, a name or a stored string.
    package static func escaped(_ text: String) -> Self {
        .string(LoggedText.render(text))
    }

    /// `error`'s description as ``LoggedText/error(_:)`` shows it.
    package static func escaped(_ error: any Error) -> Self {
        .string(LoggedText.error(error))
    }
}

/// An error whose description renders (``LoggedText/render(_:limit:)``) the text it carries
/// already, so ``LoggedText/error(_:)`` shows it as it is.
package protocol RenderedDescription: CustomStringConvertible {}

extension StorageError: RenderedDescription {}
