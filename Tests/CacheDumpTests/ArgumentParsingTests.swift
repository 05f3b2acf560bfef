import CacheDump
import Foundation
import Testing

@Suite("cache-dump's parsers and formats")
struct ArgumentParsingTests {
    @Test(
        "durations: a number and a unit, repeated; a bare number is seconds",
        arguments: [
            ("90s", Duration.seconds(90)), ("15m", .seconds(900)), ("12h", .seconds(43_200)),
            ("7d", .seconds(604_800)), ("2w", .seconds(1_209_600)), ("500ms", .milliseconds(500)),
            ("1h30m", .seconds(5_400)), ("45", .seconds(45)), ("0s", .zero),
        ])
    func durations(text: String, expected: Duration) {
        #expect(DurationArgument.parse(text) == expected)
    }

    @Test(
        "text that is not a duration is refused",
        arguments: ["", "s", "10x", "1.5h", "-3s", "h1", "99999999999999d"])
    func notDurations(text: String) {
        #expect(DurationArgument.parse(text) == nil, "\(text)")
    }

    @Test("keys are named as UTF-8, hex or base64; invalid forms are nil")
    func keyEncodings() {
        #expect(KeyEncoding.utf8.bytes("é") == [0xc3, 0xa9])
        #expect(KeyEncoding.hex.bytes("00fFa1") == [0x00, 0xff, 0xa1])
        #expect(KeyEncoding.hex.bytes("abc") == nil)
        #expect(KeyEncoding.hex.bytes("zz") == nil)
        #expect(KeyEncoding.base64.bytes("/wAQ") == [0xff, 0x00, 0x10])
        #expect(KeyEncoding.base64.bytes("***") == nil)
    }

    @Test("keys are shown as text when they are printable UTF-8, else with \\xNN escapes")
    func keyDisplay() {
        #expect(displayKey(Array("café/1".utf8)) == "café/1")
        #expect(displayKey([0x61, 0xff]) == #"a\xff"#)
        #expect(displayKey([0x61, 0x09]) == #"a\x09"#)
        #expect(displayKey(Array(#"a\b"#.utf8)) == #"a\x5cb"#, "a backslash is escaped so the form is unambiguous")
    }

    @Test("an export entry's line parses back to the same entry")
    func exportLines() throws {
        let entries = [
            ExportFormat.Entry(key: [0, 255, 1], value: [], created: 1, accessed: 2, expires: nil),
            ExportFormat.Entry(
                key: Array("k".utf8), value: Array(repeating: 7, count: 1_000), created: 3, accessed: 3, expires: 9),
        ]
        for entry in entries {
            #expect(try ExportFormat.parseEntry(Array(entry.line.utf8)) == entry)
        }
        try ExportFormat.parseHeader(Array(ExportFormat.header.utf8))
        #expect(throws: ExportFormat.LineError.self) {
            try ExportFormat.parseEntry(Array(#"{"key":"AQ==","value":"","created":1,"accessed":1,"expires":0}"#.utf8))
        }
    }

    @Test("the progress line shows the share done, the counts, the rate and the time left")
    func progressLine() {
        let line = ProgressBar.line("verify", done: 500, total: 1_000, elapsed: .seconds(2))
        #expect(line == "verify [############            ] 50% 500/1000 250/s 0:02 left")
        #expect(
            ProgressBar.line("export", done: 0, total: 0, elapsed: .zero) == "export [                        ] 0% 0/0")
    }

    @Test("every exit status is distinct and documented in the command's help")
    func exitStatuses() {
        let statuses = ExitStatus.allCases.map(\.rawValue)
        #expect(Set(statuses).count == statuses.count)
        let help = CacheDumpCommand.helpMessage().split(whereSeparator: \.isWhitespace).joined(separator: " ")
        for status in ExitStatus.allCases {
            #expect(help.contains("\(status.rawValue) "), "status \(status.rawValue) is in --help")
        }
    }
}
