import CZlib
import Foundation
import Testing

@testable import LMDBCache

/// Records hold raw DEFLATE streams (RFC 1951) and a crc32 of the zlib polynomial, written with
/// libdeflate. "zlib-compressed values" is a claim about the format, so zlib itself checks it:
/// its raw inflate (negative window bits) reads what the library wrote, and the library reads a
/// record whose value zlib deflated, at every level.
@Suite("Records and zlib")
struct ZlibInteroperabilityTests {
    /// A 4 KB JSON document, as a service caches.
    static let json: [UInt8] = {
        var text = "["
        for index in 0..<40 {
            if index > 0 { text += "," }
            text += #"{"id":\#(index),"name":"user-\#(index)","email":"user\#(index)@example.com","active":\#(index % 3 == 0)}"#
        }
        return Array((text + "]").utf8)
    }()

    static let key: [UInt8] = Array("zlib-key".utf8)

    /// The offset of a record's payload.
    static func payloadOffset(_ record: [UInt8]) throws -> Int {
        try record.withUnsafeBytes { try Record.validate($0) }.payloadOffset
    }

    @Test("zlib's raw inflate reads the value of a record the library deflated, and zlib's crc32 is its checksum", arguments: [1, 6, 9])
    func zlibReadsTheLibrarysRecords(level: Int) throws {
        let record = Self.json.withUnsafeBytes {
            Record.encode(value: $0, key: try! StorageKey(Self.key), now: 1_000, expires: 0, threshold: 1, level: level)
        }
        let header = try record.withUnsafeBytes { try Record.validate($0) }
        #expect(header.flags.contains(.compressed), "a 4 KB JSON value is stored deflated")
        let payload = Array(record[try Self.payloadOffset(record)...])
        #expect(payload.count < Self.json.count / 2)
        #expect(try Self.zlibInflate(payload, expectedLength: Self.json.count) == Self.json)
        // The checksum at 4..<8 is crc32 (zlib's) of bytes 0..<4 and 8..<end.
        let stored = record[4..<8].enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (8 * $1.offset) }
        #expect(Self.zlibCRC32(Array(record[..<4]) + Array(record[8...])) == stored)
    }

    @Test("a record whose value zlib deflated (raw, any level) reads back through the library", arguments: [0, 1, 6, 9])
    func libraryReadsZlibsStreams(level: Int32) throws {
        var record = Self.json.withUnsafeBytes {
            Record.encode(value: $0, key: try! StorageKey(Self.key), now: 1_000, expires: 0, threshold: 1, level: 6)
        }
        // Replace the payload with zlib's stream and the checksum with zlib's crc32 of the result.
        record.removeSubrange(try Self.payloadOffset(record)...)
        record += try Self.zlibDeflate(Self.json, level: level)
        let checksum = Self.zlibCRC32(Array(record[..<4]) + Array(record[8...]))
        for index in 0..<4 { record[4 + index] = UInt8(truncatingIfNeeded: checksum >> (8 * index)) }
        let value = try record.withUnsafeBytes { bytes in
            let header = try Record.validate(bytes, storedKey: try StorageKey(Self.key).bytes)
            return try Record.value(bytes, header: header)
        }
        #expect(value == Self.json)
    }

    // MARK: - zlib

    struct ZlibFailure: Error, CustomStringConvertible {
        let description: String
    }

    static func zlibInflate(_ input: [UInt8], expectedLength: Int) throws -> [UInt8] {
        var stream = z_stream()
        guard lmdbcache_raw_inflate_init(&stream) == Z_OK else { throw ZlibFailure(description: "inflateInit2") }
        defer { inflateEnd(&stream) }
        return try finish(&stream, input, capacity: expectedLength + 16, "inflate") { inflate(&$0, Z_FINISH) }
    }

    static func zlibDeflate(_ input: [UInt8], level: Int32) throws -> [UInt8] {
        var stream = z_stream()
        guard lmdbcache_raw_deflate_init(&stream, level) == Z_OK else { throw ZlibFailure(description: "deflateInit2") }
        defer { deflateEnd(&stream) }
        let capacity = Int(deflateBound(&stream, UInt(input.count)))
        return try finish(&stream, input, capacity: capacity, "deflate") { deflate(&$0, Z_FINISH) }
    }

    /// Runs `step` on `stream` over all of `input` into a buffer of `capacity` bytes, in one call.
    static func finish(
        _ stream: inout z_stream, _ input: [UInt8], capacity: Int, _ name: String,
        _ step: (inout z_stream) -> Int32
    ) throws -> [UInt8] {
        var input = input
        var output = [UInt8](repeating: 0, count: capacity)
        let status = input.withUnsafeMutableBufferPointer { inBuffer in
            output.withUnsafeMutableBufferPointer { outBuffer in
                stream.next_in = inBuffer.baseAddress
                stream.avail_in = UInt32(inBuffer.count)
                stream.next_out = outBuffer.baseAddress
                stream.avail_out = UInt32(outBuffer.count)
                return step(&stream)
            }
        }
        guard status == Z_STREAM_END else { throw ZlibFailure(description: "\(name) returned \(status)") }
        return Array(output[..<Int(stream.total_out)])
    }

    static func zlibCRC32(_ bytes: [UInt8]) -> UInt32 {
        bytes.withUnsafeBufferPointer { UInt32(crc32(0, $0.baseAddress, UInt32($0.count))) }
    }
}
