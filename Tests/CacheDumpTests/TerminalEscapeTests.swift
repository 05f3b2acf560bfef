import CacheDump
import CacheTestSupport
import Foundation
import Testing

@testable import LMDBCache

/// Keys come from whoever wrote to the cache: what cache-dump prints of them must not drive the
/// administrator's terminal (escape sequences) or reorder what it shows (bidirectional controls).
@Suite("cache-dump escapes control, format and separator characters in what it prints")
struct TerminalEscapeTests {
    /// Keys with a terminal escape sequence, bidirectional overrides and isolates, line and
    /// paragraph separators, marks, C1 controls, DEL, a byte-order mark and a zero-width space.
    static let hostileKeys: [String] = [
        "\u{1B}[31mred\u{1B}[0m", "\u{1B}]0;title\u{07}", "invoice\u{202E}fdp.exe", "line\u{2028}break",
        "para\u{2029}graph", "mark\u{200E}\u{200F}", "isolate\u{2066}x\u{2069}\u{2067}y\u{2068}",
        "c1\u{85}\u{9B}31m", "del\u{7F}", "bom\u{FEFF}", "zero\u{200B}width", "embed\u{202A}\u{202B}\u{202C}\u{202D}",
        "tag\u{E0041}", "arabic\u{061C}",
    ]

    @Test("displayKey escapes C0 and C1 controls, DEL and Unicode Cf, Zl and Zp, and keeps other text")
    func displayKeyEscapes() {
        #expect(displayKey(Array("a\u{202E}b".utf8)) == #"a\u{202E}b"#)
        #expect(displayKey(Array("\u{1B}[31m".utf8)) == #"\x1b[31m"#)
        #expect(displayKey(Array("x\u{2028}y\u{2029}".utf8)) == #"x\u{2028}y\u{2029}"#)
        #expect(displayKey(Array("\u{85}\u{9B}".utf8)) == #"\u{0085}\u{009B}"#)
        #expect(displayKey(Array("é\u{7F}".utf8)) == #"é\x7f"#)
        #expect(displayKey(Array("\u{200E}\u{2066}\u{FEFF}\u{E0041}".utf8)) == #"\u{200E}\u{2066}\u{FEFF}\u{E0041}"#)
        #expect(displayKey([0xc3, 0xa9, 0xff]) == #"é\xff"#, "a byte that is not UTF-8 is \\xNN, the rest stays text")
        #expect(displayKey(Array("日本語 ok".utf8)) == "日本語 ok")
    }

    @Test("list prints none of those characters raw, as text or as JSON")
    func listPrintsNoneRaw() throws {
        let dir = TemporaryDirectory()
        defer { dir.remove() }
        do {
            let disk = try DiskCache(directory: dir.url)
            defer { disk.close() }
            for key in Self.hostileKeys { try disk.setData([1], forKey: key) }
            try disk.flush()
        }
        let text = try CacheDumpRun(["list", dir.path])
        #expect(text.status == 0, "\(text.errorText)")
        #expect(text.lines.count == Self.hostileKeys.count + 1, "one line per key: \(text.text)")
        Self.expectNothingRaw(text.output)
        #expect(text.text.contains(#"invoice\u{202E}fdp.exe"#))
        #expect(text.text.contains(#"\x1b[31mred\x1b[0m"#))

        let json = try CacheDumpRun(["list", dir.path, "--json"])
        #expect(json.status == 0, "\(json.errorText)")
        Self.expectNothingRaw(json.output)
        let keys = try #require(try json.json() as? [[String: Any]]).compactMap { $0["key"] as? String }
        #expect(keys.contains(#"line\u{2028}break"#), "\(keys)")
        #expect(!keys.contains { $0.unicodeScalars.contains { $0.properties.generalCategory == .format } })
    }

    @Test("get of a missing key names it escaped")
    func missingKeyMessage() throws {
        let cache = try SampleCache(count: 1)
        defer { cache.remove() }
        let run = try CacheDumpRun(["get", cache.path, "a\u{202E}b\u{1B}c"])
        run.expectFailure(2, mentioning: #"no entry for key a\u{202E}b\x1bc"#)
        Self.expectNothingRaw(Array(run.errorText.utf8))
    }
}

extension TerminalEscapeTests {
    /// No C0 control but the newline, no DEL, no C1 control, and none of the format and separator
    /// characters of ``hostileKeys`` in `output`.
    static func expectNothingRaw(_ output: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            !output.contains { ($0 < 0x20 && $0 != 0x0a) || $0 == 0x7f }, "a C0 control or DEL",
            sourceLocation: sourceLocation)
        let text = String(decoding: output, as: UTF8.self)
        let raw = text.unicodeScalars.filter { scalar in
            (0x80...0x9f).contains(scalar.value)
                || [.format, .lineSeparator, .paragraphSeparator].contains(scalar.properties.generalCategory)
        }
        #expect(raw.isEmpty, "raw \(raw.map { String($0.value, radix: 16) })", sourceLocation: sourceLocation)
    }
}
