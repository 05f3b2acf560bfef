import Foundation
import Testing

@testable import LMDBCache

/// The fuzz targets' checks (`FuzzChecks`, run by `scripts/fuzz`) over inputs worth keeping: edge
/// cases written by hand, and every input a fuzzer run found to break a check, once fixed.
@Suite("Reliability: fuzz inputs kept as tests")
struct FuzzRegressionTests {
    /// A header of the current format with the given fields and a valid checksum over `payload`.
    static func record(flags: UInt8, valueLength: UInt32, keyLength: UInt32, payload: [UInt8]) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: Record.headerSize) + payload
        bytes[0] = Record.formatVersion
        bytes[1] = flags
        bytes.withUnsafeMutableBytes { raw in
            raw.storeBytes(of: valueLength.littleEndian, toByteOffset: 24, as: UInt32.self)
            raw.storeBytes(of: keyLength.littleEndian, toByteOffset: 28, as: UInt32.self)
            let checksum = Record.checksum(UnsafeRawBufferPointer(raw))
            raw.storeBytes(of: checksum.littleEndian, toByteOffset: 4, as: UInt32.self)
        }
        return bytes
    }

    static let recordInputs: [(String, [UInt8])] = [
        ("empty", []),
        ("one byte", [Record.formatVersion]),
        ("a zero header", [UInt8](repeating: 0, count: Record.headerSize)),
        ("a header of 0xFF", [UInt8](repeating: 0xFF, count: 64)),
        ("compressed, claiming 4 GiB", record(flags: 1, valueLength: .max, keyLength: 0, payload: [1, 2, 3])),
        (
            "compressed, claiming just over the value limit",
            record(flags: 1, valueLength: UInt32(Record.maxValueSize + 1), keyLength: 0, payload: [0x03, 0x00])
        ),
        ("compressed, garbage payload", record(flags: 1, valueLength: 100, keyLength: 0, payload: [0xFF, 0xFE, 0xFD])),
        ("compressed, empty payload", record(flags: 1, valueLength: 10, keyLength: 0, payload: [])),
        ("full key longer than the record", record(flags: 2, valueLength: 0, keyLength: 1_000, payload: [1, 2])),
        ("full key flag without a key", record(flags: 2, valueLength: 2, keyLength: 0, payload: [1, 2])),
        ("raw, length disagreeing with the payload", record(flags: 0, valueLength: 5, keyLength: 0, payload: [1, 2])),
        ("unknown flag bits", record(flags: 0x80, valueLength: 2, keyLength: 0, payload: [1, 2])),
    ]

    @Test("the record decoder's checks hold on hand-written edge cases", arguments: recordInputs)
    func recordEdgeCases(name: String, input: [UInt8]) {
        #expect(FuzzChecks.record(input).isEmpty, "\(name): \(FuzzChecks.record(input))")
    }

    static let keyInputs: [(String, [UInt8])] = [
        ("empty", []),
        ("8 bytes (an Int)", [0x80, 0, 0, 0, 0, 0, 0, 1]),
        ("16 bytes (a UUID)", [UInt8](repeating: 0xAB, count: 16)),
        ("invalid UTF-8", [0xC3, 0x28]),
        ("a lone continuation byte", [0x80]),
        ("NUL", [0]),
        ("503 bytes (longest direct key)", [UInt8](repeating: 7, count: StorageKey.directLimit)),
        ("504 bytes (shortest digested key)", [UInt8](repeating: 7, count: StorageKey.directLimit + 1)),
        ("10,000 bytes", sampleBytes(count: 10_000, compressible: false)),
        ("not in NFC (e and a combining acute)", Array("cafe\u{301}".utf8)),
        ("Hangul jamo, composed by NFC", Array("\u{1112}\u{1161}\u{11AB}".utf8)),
    ]

    @Test("the key codec's checks hold on hand-written edge cases", arguments: keyInputs)
    func keyEdgeCases(name: String, input: [UInt8]) {
        #expect(FuzzChecks.key(input).isEmpty, "\(name): \(FuzzChecks.key(input))")
    }

    static let exportInputs: [(String, String)] = [
        ("empty", ""),
        ("not JSON", "{"),
        ("the header", #"{"format":"lmdbcache-export","version":1}"#),
        ("an entry", #"{"key":"AQ==","value":"","created":1,"accessed":2,"expires":null}"#),
        ("an expiry of zero", #"{"key":"AQ==","value":"","created":1,"accessed":2,"expires":0}"#),
        ("negative times", #"{"key":"AQ==","value":"","created":-5,"accessed":2,"expires":null}"#),
        ("times past Int64", #"{"key":"AQ==","value":"","created":99999999999999999999,"accessed":2,"expires":null}"#),
        ("a fractional time", #"{"key":"AQ==","value":"","created":1.5,"accessed":2,"expires":null}"#),
        ("base64 with whitespace", #"{"key":"A Q==","value":"","created":1,"accessed":2,"expires":null}"#),
        ("extra fields", #"{"key":"AQ==","value":"","created":1,"accessed":2,"expires":3,"more":[1,{}]}"#),
        ("deep nesting", String(repeating: "[", count: 10_000)),
        ("a NUL byte", "{\"key\":\"AQ==\u{0}\"}"),
    ]

    @Test("the export-file parser's checks hold on hand-written edge cases", arguments: exportInputs)
    func exportEdgeCases(name: String, input: String) {
        let bytes = Array(input.utf8)
        #expect(FuzzChecks.exportLine(bytes).isEmpty, "\(name): \(FuzzChecks.exportLine(bytes))")
    }

    static let respInputs: [(String, [UInt8])] = [
        ("empty", []),
        (
            "every scalar type",
            Array("+OK\r\n-ERR x\r\n:-1\r\n$3\r\nabc\r\n$-1\r\n_\r\n#t\r\n,1.5\r\n(12\r\n=5\r\ntxt:a\r\n".utf8)
        ),
        ("aggregates and an attribute", Array("*2\r\n%1\r\n+k\r\n~1\r\n>0\r\n|1\r\n+a\r\n+b\r\n*-1\r\n".utf8)),
        ("a line split across CR and LF", Array("+OK\r".utf8)),
        ("past the fuzz limits", Array("$1001\r\n*101\r\n".utf8)),
        ("nested past the fuzz depth", Array((String(repeating: "*1\r\n", count: 9) + ":1\r\n").utf8)),
        ("a line past the fuzz limit", Array(("+" + String(repeating: "x", count: 201) + "\r\n").utf8)),
        // Found by fuzz-resp: a bulk error holding CRLF re-encoded as a simple error.
        ("a bulk error holding CR and LF", Array("!12\r\n55555!2\r\n".utf8) + [0xFF, 0x8A, 0x0D, 0x0D, 0x0A]),
        ("arguments with CR, LF and empty ones", Array("a\r\n".utf8) + [0xFF, 0xFF] + Array("b".utf8)),
    ]

    @Test("the RESP parser's checks hold on hand-written edge cases", arguments: respInputs)
    func respEdgeCases(name: String, input: [UInt8]) {
        #expect(FuzzChecks.resp(input).isEmpty, "\(name): \(FuzzChecks.resp(input))")
    }
}
