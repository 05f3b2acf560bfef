import Foundation
import Logging
import Testing

import LMDBCacheStorage

@testable import LMDBCache

/// Keys, stored strings and other code's error messages reach log messages and error
/// descriptions escaped and cut short: a newline, an escape sequence or a bidi control in a key
/// must not forge a log line, recolour a terminal or reorder what an operator reads.
@Suite("Reliability: keys and stored text in logs and errors")
struct UntrustedTextTests {
    /// 10 KB of digits, whose rendering must be cut short.
    static let longKey = String(repeating: "0123456789", count: 1_024)
    /// A run of `longKey` longer than any rendering of a key may show.
    static let longRun = String(repeating: "0123456789", count: 10)

    /// Keys as a client could send them.
    static let keys: [String] = [
        "user@example.com\nLMDBCache forged: level=error",
        "\u{1B}[31mred\u{1B}[0m",
        "invoice\u{202E}fdp.exe",
        "first\u{2028}second\u{2029}third",
        "c0 \u{0}\u{7}\r\t c1 \u{85}\u{9B} del \u{7F} cf \u{200B}\u{200E}\u{2066}\u{FEFF}\u{E0001}",
        longKey,
        String(repeating: "\u{1B}", count: 10_240),
    ]

    /// A stored string: the name of a JSON field, which a decoding error quotes.
    static let storedField = "field\n\u{1B}[2J\u{202E}\u{2028}"

    /// C0, DEL, C1, and Unicode's format characters and line and paragraph separators.
    static func isForbidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: return true
        default: break
        }
        switch scalar.properties.generalCategory {
        case .format, .lineSeparator, .paragraphSeparator: return true
        default: return false
        }
    }

    /// Records an issue for each text holding a forbidden character or longer than `limit`
    /// characters, and, when `keysOnly` (no other text quotes ``longKey``), for one showing more
    /// of ``longKey`` than a key's rendering may.
    static func expectClean(
        _ texts: [String], limit: Int, keysOnly: Bool = true, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        for text in texts {
            // The test's own report must not carry what it looks for.
            let shown = text.unicodeScalars.prefix(300).map { scalar in
                isForbidden(scalar) ? "<U+\(String(scalar.value, radix: 16, uppercase: true))>" : String(scalar)
            }.joined()
            if let bad = text.unicodeScalars.first(where: isForbidden) {
                Issue.record(
                    "U+\(String(bad.value, radix: 16, uppercase: true)) reached \(shown)",
                    sourceLocation: sourceLocation)
            }
            #expect(
                text.unicodeScalars.count <= limit, "\(text.unicodeScalars.count) characters: \(shown)",
                sourceLocation: sourceLocation)
            if keysOnly {
                #expect(!text.contains(longRun), "a long key shown at length: \(shown)", sourceLocation: sourceLocation)
            }
        }
    }

    struct HostileError: Error, CustomStringConvertible {
        var description: String
    }

    /// A codec whose every call fails with `text` as its error's message.
    struct FailingCodec: ValueCodec {
        var text: String
        func encode(_ value: String) throws -> [UInt8] { throw HostileError(description: text) }
        func decode(_ bytes: [UInt8]) throws -> String { throw HostileError(description: text) }
    }

    @Test("values that no longer decode (a changed type) are logged with their keys and the decoder's text escaped")
    func undecodableValuesLogged() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let writer = try Cache<String, [String: Int]>(directory: dir.url, configuration: .init())
            for key in Self.keys { writer[key] = [Self.storedField: 1] }
            try writer.flush()
            writer.close()
        }
        let log = CapturedLog()
        let reader = try Cache<String, [String: String]>(directory: dir.url, configuration: .init(), logger: log.logger)
        defer { reader.close() }
        for key in Self.keys { #expect(reader[key] == nil, "the value no longer decodes") }
        let failures = log.messages(atLeast: .trace).filter { $0.contains("could not decode") }
        #expect(failures.count == Self.keys.count, "each failure was logged")
        Self.expectClean(log.everything(), limit: 2_500)
    }

    @Test("a codec's and a loader's error text reach the log escaped and cut short")
    func foreignErrorsLogged() async throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        let log = CapturedLog()
        let hostile = "codec says\n\u{1B}[31m\u{202E}" + Self.longKey
        let cache = try Cache<String, String>(
            directory: dir.url, configuration: .init(codec: FailingCodec(text: hostile)), logger: log.logger)
        defer { cache.close() }
        for key in Self.keys {
            cache[key] = "value"
            _ = try? await cache.value(forKey: key, policy: .reloadIgnoringCache) {
                throw HostileError(description: "loader says\u{2028}" + key)
            }
        }
        #expect(throws: CacheError.self) { try cache.flush() }
        let messages = log.messages(atLeast: .trace)
        #expect(messages.filter { $0.contains("insert failed") }.count == Self.keys.count)
        #expect(messages.filter { $0.contains("loader failed") }.count == Self.keys.count)
        Self.expectClean(log.everything(), limit: 2_500, keysOnly: false)
    }

    @Test("CacheError.notFound keeps the key as given; its description shows the key escaped and cut short")
    func notFoundDescription() async throws {
        let cache = Cache<String, String>(memory: .init())
        defer { cache.close() }
        for key in Self.keys {
            await #expect {
                try await cache.value(forKey: key, policy: .cacheOnly) { "never loaded" }
            } throws: { error in
                guard case .notFound(let reported) = error as? CacheError else { return false }
                return reported == key
            }
            Self.expectClean([String(describing: CacheError.notFound(key: key))], limit: 160)
        }
        let forged = String(describing: CacheError.notFound(key: Self.keys[0]))
        #expect(forged.contains(#"user@example.com\nLMDBCache forged"#), "escaped, still readable: \(forged)")
        #expect(String(describing: CacheError.notFound(key: "a1")) == "no cached value for key a1")
    }

    @Test("every CacheError's description escapes the text it carries and stays bounded")
    func everyDescriptionEscaped() {
        for text in Self.keys {
            let errors: [CacheError] = [
                .invalidKey(reason: text),
                .directoryUnavailable(path: text, reason: text),
                .diskFull(path: text),
                .damagedStore(path: text, reason: text),
                .unsupportedFormat(path: text, found: 9, supported: 2),
                .resourceExhausted(resource: text, operation: text),
                .storeInUse(path: text, operation: text),
                .invalidName(name: text, reason: text),
                .codecFailed(operation: text, reason: text),
                .notFound(key: text),
                .lmdb(code: -1, operation: text, message: text),
            ]
            Self.expectClean(errors.map { String(describing: $0) }, limit: 2_500, keysOnly: false)
            Self.expectClean(errors.map { String(reflecting: $0) }, limit: 2_500, keysOnly: false)
        }
    }
    @Test("the rendering: escapes as in a Swift string literal, other text as it is, a marker past the limit")
    func renderingForm() {
        #expect(LoggedText.render("plain ünïcode 日本 🙂") == "plain ünïcode 日本 🙂")
        #expect(LoggedText.render("a\nb\r\t\0") == #"a\nb\r\t\0"#)
        #expect(
            LoggedText.render(#"quote " and \n"#) == #"quote \" and \\n"#, "backslashes and quotes stay unambiguous")
        #expect(LoggedText.render("\u{1B}[31m\u{7F}\u{85}") == #"\u{1B}[31m\u{7F}\u{85}"#)
        #expect(
            LoggedText.render("\u{202E}\u{2028}\u{2029}\u{200B}\u{FEFF}")
                == #"\u{202E}\u{2028}\u{2029}\u{200B}\u{FEFF}"#)
        let exact = String(repeating: "x", count: LoggedText.keyLimit)
        #expect(LoggedText.render(exact, limit: LoggedText.keyLimit) == exact, "at the limit: not cut")
        #expect(LoggedText.render(exact + "y", limit: LoggedText.keyLimit) == exact + "…[65 bytes]")
        // An escape that does not fit whole is left out whole.
        #expect(LoggedText.render("abc\n", limit: 4) == "abc…[4 bytes]")
        #expect(LoggedText.render("abc", limit: -1) == "…[3 bytes]", "a negative limit counts as 0")
        #expect(LoggedText.key(Array(repeating: UInt8(7), count: 100)).unicodeScalars.count < 100)
        #expect(LoggedText.key("k") == "k")
        let huge = String(repeating: "\u{1B}", count: 1 << 20)
        #expect(LoggedText.render(huge).unicodeScalars.count <= LoggedText.textLimit + 20)
    }
}
