import Foundation
import LMDBCache

/// The file `cache-dump export` writes and `import` reads: JSON Lines. The first line names the
/// format, `{"format":"lmdbcache-export","version":1}`; each further line is one entry:
///
/// ```json
/// {"key":"<base64>","value":"<base64>","created":1763900000000,"accessed":1763900000000,"expires":null}
/// ```
///
/// Times are milliseconds since 1970 (UTC); `expires` is null for an entry that never expires.
/// Key and value are base64 so that any bytes round-trip.
public enum ExportFormat {
    /// The `format` of the header line.
    public static let name = "lmdbcache-export"
    /// The newest version this build writes and reads.
    public static let version = 1
    /// The header line, without its newline.
    public static var header: String { "{\"format\":\"\(name)\",\"version\":\(version)}" }

    /// The longest value an entry may hold: the disk tier's limit (`DiskCache` refuses longer
    /// ones with `CacheError.valueTooLarge`).
    public static let maxValueLength = Record.maxValueSize
    /// The longest key `import` takes, 16 MiB. The library takes keys of any length below 4 GiB,
    /// but a key that long in a line would have import hold gigabytes for it; `export` warns
    /// about keys it writes that are longer.
    public static let maxKeyLength = 16 << 20
    /// The longest line an entry may take: key and value at their limits in base64, the rest of
    /// the line with the longest numbers, and 64 KiB to spare for spacing and fields a reader
    /// ignores. `import` refuses a longer line without reading the rest of it.
    public static let maxLineLength = base64Length(maxKeyLength) + base64Length(maxValueLength) + 256 + (64 << 10)

    /// One entry of an export file.
    public struct Entry: Equatable, Sendable {
        public var key: [UInt8]
        public var value: [UInt8]
        public var created: UInt64
        public var accessed: UInt64
        public var expires: UInt64?

        public init(key: [UInt8], value: [UInt8], created: UInt64, accessed: UInt64, expires: UInt64?) {
            self.key = key
            self.value = value
            self.created = created
            self.accessed = accessed
            self.expires = expires
        }

        /// The entry as one line, without its newline.
        public var line: String {
            let expiry = expires.map(String.init) ?? "null"
            return "{\"key\":\"\(Data(key).base64EncodedString())\",\"value\":\"\(Data(value).base64EncodedString())\","
                + "\"created\":\(created),\"accessed\":\(accessed),\"expires\":\(expiry)}"
        }
    }

    /// Why a line could not be read.
    public struct LineError: Error, Equatable, CustomStringConvertible, Sendable {
        public var description: String
    }

    private struct HeaderFields: Decodable {
        var format: String
        var version: Int
    }

    private struct EntryFields: Decodable {
        var key: String
        var value: String
        var created: Int64
        var accessed: Int64
        var expires: Int64?
    }

    /// Checks the header line; throws when it is not an export this build can read.
    public static func parseHeader(_ line: some Collection<UInt8>) throws(LineError) {
        guard let fields = try? JSONDecoder().decode(HeaderFields.self, from: Data(line)), fields.format == name
        else {
            throw LineError(description: "not an LMDBCache export (the first line must be \(header))")
        }
        guard fields.version >= 1, fields.version <= version else {
            throw LineError(description: "export format version \(fields.version); this build reads 1 to \(version)")
        }
    }

    /// Parses one entry line, checking it against every limit a write checks: a key of 1 byte to
    /// ``maxKeyLength``, a value of at most ``maxValueLength``, times of 0 or more (an expiry
    /// after 1970). Sizes are checked on the base64 text, before anything is decoded.
    public static func parseEntry(_ line: some Collection<UInt8>) throws(LineError) -> Entry {
        let fields: EntryFields
        do {
            fields = try JSONDecoder().decode(EntryFields.self, from: line as? Data ?? Data(line))
        } catch {
            throw LineError(description: "not an entry: \(Self.reason(error))")
        }
        if let length = decodedLength(fields.key), length > maxKeyLength {
            throw LineError(
                description: "\"key\" is \(bytes(length)); import takes keys of up to \(bytes(maxKeyLength))")
        }
        if let length = decodedLength(fields.value), length > maxValueLength {
            throw LineError(
                description:
                    "\"value\" is \(bytes(length)); the disk tier stores values of up to \(bytes(maxValueLength))")
        }
        guard let key = Data(base64Encoded: fields.key), !key.isEmpty else {
            throw LineError(description: "\"key\" is not non-empty base64")
        }
        guard let value = Data(base64Encoded: fields.value) else {
            throw LineError(description: "\"value\" is not base64")
        }
        guard fields.created >= 0, fields.accessed >= 0 else {
            throw LineError(description: "\"created\" and \"accessed\" must be 0 or more")
        }
        if let expires = fields.expires, expires <= 0 {
            throw LineError(description: "\"expires\" must be null or after 1970")
        }
        return Entry(
            key: [UInt8](key), value: [UInt8](value), created: UInt64(fields.created),
            accessed: UInt64(fields.accessed), expires: fields.expires.map { UInt64($0) })
    }

    /// `268,435,458 bytes (256.0 MiB)`.
    private static func bytes(_ count: Int) -> String {
        "\(OutputFormatting.count(count)) bytes (\(OutputFormatting.bytes(count)))"
    }

    /// The length of `count` bytes in base64 (padded).
    static func base64Length(_ count: Int) -> Int {
        (count + 2) / 3 * 4
    }

    /// How many bytes the base64 `text` decodes to, from its length and padding alone; nil when
    /// its length is not a multiple of 4 (then it is not base64 at all).
    static func decodedLength(_ text: String) -> Int? {
        let utf8 = text.utf8
        guard utf8.count % 4 == 0 else { return nil }
        let padding = utf8.suffix(2).reversed().prefix { $0 == UInt8(ascii: "=") }.count
        return utf8.count / 4 * 3 - padding
    }

    private static func reason(_ error: any Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, _): return "\"\(key.stringValue)\" is missing"
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            return "\"\(context.codingPath.map(\.stringValue).joined(separator: "."))\" has the wrong type"
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            return "\"\(context.codingPath.map(\.stringValue).joined(separator: "."))\" has an invalid value"
        default: return "not valid JSON"
        }
    }
}
